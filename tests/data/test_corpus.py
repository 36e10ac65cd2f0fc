from __future__ import annotations

import gzip

import pytest

from nmt.data.corpus import read_lines, read_parallel, split_path
from nmt.errors import NmtError


def test_plain_gz_and_crlf(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"one\r\ntwo\n\nfour")
    with gzip.open(tmp_path / "b.txt.gz", "wb") as f:
        f.write(b"eins\nzwei\n\nvier\n")
    assert read_lines(tmp_path / "a.txt") == ["one", "two", "", "four"]
    assert read_lines(tmp_path / "b.txt.gz") == ["eins", "zwei", "", "vier"]


def test_gz_fallback_in_split_path(tmp_path):
    with gzip.open(tmp_path / "train.de.gz", "wb") as f:
        f.write(b"x\n")
    assert split_path(tmp_path, "train", "de").name == "train.de.gz"


def test_undecodable_byte_names_file_and_line(tmp_path):
    (tmp_path / "bad.txt").write_bytes(b"fine\nalso fine\nbad \xff byte\n")
    with pytest.raises(NmtError, match=r"bad\.txt:3: not UTF-8"):
        read_lines(tmp_path / "bad.txt")


def test_line_count_mismatch_names_both(tmp_path):
    (tmp_path / "s").write_text("a\nb\n")
    (tmp_path / "t").write_text("a\n")
    with pytest.raises(NmtError, match=r"has 2 lines but .* has 1"):
        read_parallel(tmp_path / "s", tmp_path / "t")


def test_directory_and_missing(tmp_path):
    with pytest.raises(NmtError, match="is a directory"):
        read_lines(tmp_path)
    with pytest.raises(NmtError, match="no such file"):
        read_lines(tmp_path / "absent")


def test_multi30k_reads(multi30k):
    src, tgt = read_parallel(multi30k / "val.de.gz", multi30k / "val.en.gz")
    assert len(src) == len(tgt) == 1014


def test_uneven_files_are_named_with_their_counts(tmp_path):
    (tmp_path / "a").write_text("x\n")
    (tmp_path / "b").write_text("x\n" * 1200)
    with pytest.raises(NmtError, match=r"a has 1 line but .*b has 1,200$"):
        read_parallel(tmp_path / "a", tmp_path / "b")
