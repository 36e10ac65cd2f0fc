"""``nmt data align``: eflomal's alignments, symmetrised, beside the data."""

from __future__ import annotations

import random
import sys

import pytest

from nmt.data.align import align_corpus
from nmt.data.alignment import aer, grow_diag_final_and, read_alignments
from nmt.errors import NmtError
from tests.conftest import require_extra
from tests.test_cli import invoke


def test_grow_diag_final_and():
    forward = {(0, 0), (1, 1), (2, 3)}
    reverse = {(0, 0), (1, 1), (1, 2), (3, 3)}
    # From the intersection {(0,0), (1,1)}, growing adds union links next to a link
    # (diagonals too) that align a new word: (1,2), then (2,3), then (3,3).
    assert grow_diag_final_and(forward, reverse) == {(0, 0), (1, 1), (1, 2), (2, 3), (3, 3)}
    # Nothing to grow into: final-and adds a directional link only if both of its
    # words are unaligned, forward first: (2,2) goes in, (2,3) then does not.
    assert grow_diag_final_and({(0, 0), (2, 2)}, {(0, 0), (2, 3)}) == {(0, 0), (2, 2)}
    assert grow_diag_final_and(set(), set()) == set()


def moses_grow_diag_final_and(forward, reverse, src_len, tgt_len):
    """The pseudo-code of Koehn et al.'s grow-diag-final-and as Moses documents it:
    sweep the grid in order, growing from every link of the current alignment into
    neighbouring union links (diagonals too) with a still unaligned word, until a
    sweep adds none; then FINAL-AND(forward), FINAL-AND(reverse)."""
    links, union = forward & reverse, forward | reverse
    around = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]

    def src_free(i):
        return all(a != i for a, _ in links)

    def tgt_free(j):
        return all(b != j for _, b in links)

    added = True
    while added:
        added = False
        for i in range(src_len):
            for j in range(tgt_len):
                if (i, j) not in links:
                    continue
                for di, dj in around:
                    n = (i + di, j + dj)
                    if n in union and n not in links and (src_free(n[0]) or tgt_free(n[1])):
                        links.add(n)
                        added = True
    for direction in (forward, reverse):
        for i in range(src_len):
            for j in range(tgt_len):
                if (i, j) in direction and src_free(i) and tgt_free(j):
                    links.add((i, j))
    return links


def test_grow_diag_final_and_agrees_with_the_moses_pseudo_code():
    rng = random.Random(0)
    for _ in range(500):
        S, T = rng.randint(1, 7), rng.randint(1, 7)
        grid = [(i, j) for i in range(S) for j in range(T)]
        forward = {p for p in grid if rng.random() < 0.25}
        reverse = {p for p in grid if rng.random() < 0.25}
        want = moses_grow_diag_final_and(forward, reverse, S, T)
        assert grow_diag_final_and(forward, reverse) == want, (forward, reverse)


@pytest.mark.slow
def test_alignments_of_the_toy_corpus_are_close_to_gold(toy_dir, tmp_path):
    require_extra("eflomal", "align")
    for split in ("train", "val"):
        for side in ("src", "tgt"):
            (tmp_path / f"{split}.{side}").write_text((toy_dir / f"{split}.{side}").read_text())
    result = invoke("data", "align", tmp_path, "--src", "src", "--tgt", "tgt")
    assert result.exit_code == 0, result.output
    for split in ("train", "val"):
        got = read_alignments(tmp_path / f"{split}.align")
        gold = read_alignments(toy_dir / f"{split}.align")
        assert len(got) == len(gold) and aer(got, gold) < 0.25, aer(got, gold)
    again = invoke("data", "align", tmp_path, "--src", "src", "--tgt", "tgt")
    assert again.exit_code == 2 and "train.align: exists; not overwritten" in again.output


def test_without_the_extra_or_the_files_it_says_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "eflomal", None)
    with pytest.raises(NmtError, match=r"pip install 'nmt-attention\[align\]'"):
        align_corpus(tmp_path, "de", "en", None, print)
    monkeypatch.delitem(sys.modules, "eflomal")
    require_extra("eflomal", "align")
    with pytest.raises(NmtError, match=r"no split with both \.de and \.en files"):
        align_corpus(tmp_path, "de", "en", None, print)


def test_empty_files_are_refused_and_nothing_is_written(tmp_path):
    require_extra("eflomal", "align")
    for side in ("de", "en"):
        (tmp_path / f"val.{side}").write_text("")
    result = invoke("data", "align", tmp_path, "--src", "de", "--tgt", "en")
    assert result.exit_code == 2 and "val: empty files, nothing to align" in result.output
    assert not (tmp_path / "val.align").exists()


def test_a_file_for_the_directory_or_one_side_twice_is_named(tmp_path, toy_dir):
    require_extra("eflomal", "align")
    (tmp_path / "afile").write_text("x\n")
    with pytest.raises(NmtError, match=r"afile: a file, not a directory"):
        align_corpus(tmp_path / "afile", "src", "tgt", None, print)
    with pytest.raises(NmtError, match=r"--src and --tgt are both 'src'"):
        align_corpus(toy_dir, "src", "src", ["test"], print)  # before "test.align exists"
