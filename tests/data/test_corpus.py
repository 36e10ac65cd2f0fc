from __future__ import annotations

import gzip
import io
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmt.data import corpus
from nmt.data.corpus import (
    count_lines,
    decode_lines,
    input_chunks,
    read_input,
    read_lines,
    read_parallel,
    split_path,
)
from nmt.errors import NmtError
from tests.helpers import line_text

text = line_text(max_size=12)  # CR included: a CRLF ending loses its CR
contents = st.builds(
    lambda lines, final_lf: "\n".join(lines).encode() + (b"\n" if final_lf and lines else b""),
    st.lists(text, max_size=8),
    st.booleans(),
)
fixture_ok = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def as_stdin(monkeypatch, raw: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw)))


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


@fixture_ok
@given(contents, st.booleans())
def test_a_file_and_stdin_read_the_same_lines_and_count_them_alike(tmp_path, monkeypatch, raw, gz):
    """A final line without LF is a line; an empty file has none; the counter that
    sizes progress bars agrees with the reader, plain or gzipped."""
    path = tmp_path / ("in.txt.gz" if gz else "in.txt")
    path.write_bytes(gzip.compress(raw) if gz else raw)
    want = raw.decode().split("\n")
    if want[-1] == "":  # the final LF ends the last line; an empty file has none
        want.pop()
    lines = read_lines(path)
    assert lines == [x.removesuffix("\r") for x in want]
    assert count_lines(path) == len(lines)
    as_stdin(monkeypatch, raw)
    assert read_input("-") == lines == decode_lines(raw, "<stdin>")


def test_lines_are_counted_across_read_blocks(tmp_path, monkeypatch):
    """count_lines reads blocks: a block that ends a line, and one that does not."""
    monkeypatch.setattr(corpus, "BLOCK", 8)
    for raw, n in [(b"1234567\n" * 3, 3), (b"1234567\n" * 3 + b"x", 4), (b"12345678", 1)]:
        (tmp_path / "f").write_bytes(raw)
        assert count_lines(tmp_path / "f") == n == len(read_lines(tmp_path / "f"))


def test_a_bad_byte_on_stdin_names_its_line(monkeypatch):
    as_stdin(monkeypatch, b"fine\n\nbad \xff\n")
    with pytest.raises(NmtError, match=r"^<stdin>:3: not UTF-8 text \(byte 0xff at column 5\)$"):
        read_input(None)


@fixture_ok
@given(st.lists(text, max_size=12), st.integers(1, 5), st.booleans())
def test_input_comes_in_chunks_of_the_size_asked_in_order(
    tmp_path, monkeypatch, lines, size, from_stdin
):
    raw = "".join(x + "\n" for x in lines).encode()
    if from_stdin:
        as_stdin(monkeypatch, raw)
        source = "-"
    else:
        source = tmp_path / "in.txt"
        source.write_bytes(raw)
    total, chunks = input_chunks(source, size)
    chunks = list(chunks)
    want = [x.removesuffix("\r") for x in lines]
    assert total == len(want) and [x for c in chunks for x in c] == want
    assert all(len(c) == size for c in chunks[:-1]) and all(0 < len(c) <= size for c in chunks)
