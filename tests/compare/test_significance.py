"""A difference is significant only when the paired test and every seed agree."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nmt.compare.analysis import RunAnalysis, SplitAnalysis
from nmt.compare.significance import judge
from nmt.compare.spec import SignificanceSpec


def run(seed: int, bleu: float) -> RunAnalysis:
    part = SplitAnalysis(
        bleu=bleu, chrf=50.0, signatures={}, sentences_per_s=1.0, hyps=["a"], refs=["a"],
        stats=np.zeros((1, 10)), src_words=np.ones(1), attention={},
    )  # fmt: skip
    return RunAnalysis("v", seed, Path("."), 0, {}, [], {"test": part})


BASE = [run(1, 30.0), run(2, 31.0), run(3, 30.5)]


@pytest.mark.parametrize(
    ("bleus", "p", "significant", "words"),
    [
        ([31.0, 32.0, 31.5], 0.01, True, "significant (p 0.010; all 3 seeds agree)"),
        ([31.0, 30.0, 31.5], 0.01, False, "within seed noise"),  # seed 2 below
        ([31.0, 32.0, 31.5], 0.20, False, "not significant (p 0.200"),
        ([29.0, 30.0, 29.5], 0.001, True, "-1.00 BLEU against base, significant"),
    ],
)
def test_verdicts(bleus, p, significant, words):
    runs = [run(s, b) for s, b in zip((1, 2, 3), bleus)]
    out = judge("v", runs, "base", BASE, "test", SignificanceSpec(), p)
    assert out["significant"] is significant
    assert words in out["verdict"]
    assert out["seed_deltas"] == pytest.approx(
        [b - r.splits["test"].bleu for b, r in zip(bleus, BASE)]
    )


def test_one_seed_gives_no_verdict_however_small_p():
    out = judge("v", [run(1, 40.0)], "base", BASE, "test", SignificanceSpec(), 0.0001)
    assert not out["significant"] and "seed noise not measured" in out["verdict"]


def test_seeds_are_paired_by_number():
    """Only the seeds both sides have count; a missing seed is left out, not shifted."""
    out = judge("v", [run(2, 32.0), run(3, 31.5)], "base", BASE, "test", SignificanceSpec(), 0.01)
    assert out["seed_deltas"] == pytest.approx([1.0, 1.0]) and out["significant"]
