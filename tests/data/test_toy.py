from __future__ import annotations

import itertools

import pytest
from typer.testing import CliRunner

from nmt.cli import app
from nmt.data.corpus import read_lines
from nmt.data.toy import LONG_MIN_LEN, TRAIN_MAX_LEN, generate, write_corpus
from nmt.errors import NmtError


def test_alignments_are_valid_and_cover_every_target_word(toy_dir):
    for split in ("train", "val", "test", "test_long"):
        src = read_lines(toy_dir / f"{split}.src")
        tgt = read_lines(toy_dir / f"{split}.tgt")
        align = read_lines(toy_dir / f"{split}.align")
        assert len(src) == len(tgt) == len(align) > 0
        for s, t, a in zip(src, tgt, align):
            pairs = [tuple(map(int, p.split("-"))) for p in a.split()]
            assert all(0 <= i < len(s.split()) and 0 <= j < len(t.split()) for i, j in pairs)
            assert sorted({j for _, j in pairs}) == list(range(len(t.split())))


def test_lengths_and_test_long(toy_dir):
    train = [len(s.split()) for s in read_lines(toy_dir / "train.src")]
    long = [len(s.split()) for s in read_lines(toy_dir / "test_long.src")]
    assert min(train) >= 3 and max(train) <= TRAIN_MAX_LEN
    assert min(long) >= LONG_MIN_LEN > max(train)


def test_grammar_has_reorderings_and_one_to_many():
    pairs = generate(300, seed=1, min_len=3, max_len=40, clauses=(1, 4))
    crossing = one_to_many = long_distance = 0
    for p in pairs:
        src_of = {}
        for i, j in p.align:
            src_of.setdefault(i, []).append(j)
        one_to_many += any(len(js) > 1 for js in src_of.values())
        ordered = sorted(p.align)
        crossing += any(a[1] > b[1] for a, b in itertools.pairwise(ordered))
        long_distance += any(
            abs(i - j) >= 4 and abs((j - i) - (ordered[-1][1] - ordered[-1][0])) > 3
            for i, j in p.align
        )
    assert crossing > 100 and one_to_many > 100 and long_distance > 10


def test_deterministic_per_seed(tmp_path):
    write_corpus(tmp_path / "a", size=50, seed=3)
    write_corpus(tmp_path / "b", size=50, seed=3)
    write_corpus(tmp_path / "c", size=50, seed=4)
    a = (tmp_path / "a" / "train.src").read_text()
    assert a == (tmp_path / "b" / "train.src").read_text()
    assert a != (tmp_path / "c" / "train.src").read_text()


def test_regenerating_is_harmless_but_other_files_are_kept(tmp_path):
    """The same corpus again rewrites nothing that differs; another corpus (a user's
    own files, or another seed) in the directory is refused before any write."""
    write_corpus(tmp_path, size=50, seed=3)
    write_corpus(tmp_path, size=50, seed=3)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(NmtError, match=r"train\.src: exists with other content; not overwritten"):
        write_corpus(tmp_path, size=50, seed=4)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_size_is_bounded():
    result = CliRunner().invoke(app, ["data", "toy", "unused", "--size", str(10**12)])
    assert result.exit_code == 2 and "--size: must be in 1..1,000,000" in result.output


def test_a_file_where_the_directory_goes_is_refused_before_generating(tmp_path):
    (tmp_path / "afile").write_text("mine\n")
    with pytest.raises(NmtError, match=r"afile: a file, not a directory"):
        write_corpus(tmp_path / "afile", size=10**6)  # refused at once, not after minutes
    assert (tmp_path / "afile").read_text() == "mine\n"
