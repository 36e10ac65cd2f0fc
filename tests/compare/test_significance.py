"""A difference is significant only when the paired test and every seed agree."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from nmt.compare.aggregate import contrast_rows, summarise
from nmt.compare.analysis import RunAnalysis, SplitAnalysis
from nmt.compare.significance import adjust_family, holm, judge
from nmt.decoding.metrics import bleu, sentence_stats
from nmt.setup.compare import SignificanceSpec
from tests.helpers import noisy


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
        ([31.0, 31.0, 31.5], 0.01, False, "within seed noise"),  # seed 2 ties: no side
        ([31.0, 32.0, 31.5], 0.05, False, "not significant (p 0.050"),  # p < alpha, strictly
    ],
)
def test_verdicts(bleus, p, significant, words):
    runs = [run(s, b) for s, b in zip((1, 2, 3), bleus)]
    out = judge("v", runs, "base", BASE, "test", SignificanceSpec(), p)
    assert out.significant is significant
    assert words in out.verdict
    assert out.seed_deltas == pytest.approx(
        [b - r.splits["test"].bleu for b, r in zip(bleus, BASE)]
    )


def test_one_seed_gives_no_verdict_however_small_p():
    out = judge("v", [run(1, 40.0)], "base", BASE, "test", SignificanceSpec(), 0.0001)
    assert not out.significant and "seed noise not measured" in out.verdict


def test_seeds_are_paired_by_number():
    """Only the seeds both sides have count; a missing seed is left out, not shifted."""
    out = judge("v", [run(2, 32.0), run(3, 31.5)], "base", BASE, "test", SignificanceSpec(), 0.01)
    assert out.seed_deltas == pytest.approx([1.0, 1.0]) and out.significant
    # two give a verdict, said to be weak: two signs agree by chance one time in two
    assert "significant on two seeds only (p 0.010; both agree" in out.verdict
    assert "a weak test" in out.verdict


def test_holm_adjusts_as_the_step_down_procedure():
    """Sorted p 0.01, 0.02, 0.04, 0.30 times 4, 3, 2, 1 -> 0.04, 0.06, 0.08, 0.30; an
    adjusted p never falls below one of a smaller raw p, and none exceeds 1."""
    assert holm([0.04, 0.01, 0.30, 0.02]) == pytest.approx([0.08, 0.04, 0.30, 0.06])
    assert holm([0.02, 0.021]) == pytest.approx([0.04, 0.04])  # 0.021 x 1 lifted to 0.04
    assert holm([0.6, 0.9]) == pytest.approx([1.0, 1.0])
    assert holm([0.03]) == [0.03] and holm([]) == []


def scored(name: str, seed: int, hyps: list[str], refs: list[str]) -> RunAnalysis:
    part = SplitAnalysis(
        bleu=bleu(hyps, refs), chrf=50.0, signatures={"bleu": "", "chrf": ""}, hyps=hyps,
        refs=refs, stats=sentence_stats(hyps, refs), src_words=np.ones(len(refs)), attention={},
        sentences_per_s=1.0,
    )  # fmt: skip
    train = {"steps": 1, "seconds": 1.0, "tokens_per_s": 1.0}
    return RunAnalysis(name, seed, Path("."), 0, train, [], {"test": part})


def test_contrasts_are_judged_as_the_baseline_test_judges():
    """A contrast [b, a] gets the p-value, per-seed differences and verdict that judging
    b against a as the baseline gives; a pair with an unfinished side is not tested."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    refs = [" ".join(rng.choice(words, 8)) for _ in range(60)]

    runs = {
        "a": [scored("a", s, noisy(refs, 0.6, s), refs) for s in (1, 2, 3)],
        "b": [scored("b", s, noisy(refs, 0.8, 10 + s), refs) for s in (1, 2, 3)],
        "c": [],
    }
    spec = SignificanceSpec()
    rows = contrast_rows(runs, ("test",), (("b", "a"), ("c", "a")), 1000, spec)
    b_vs_a, c_vs_a = (r.test for r in rows)
    as_baseline = summarise(runs, ("test",), "a", 1000, (10,), spec)
    row_b = next(r.test for r in as_baseline if r.variant == "b")
    for key in ("p_value", "seed_deltas", "significant", "verdict"):
        assert getattr(b_vs_a, key) == getattr(row_b, key)
    assert b_vs_a.significant and "b: +" in b_vs_a.verdict
    assert b_vs_a.p_holm == b_vs_a.p_value  # the only tested pair
    assert c_vs_a.p_value is None and "not compared" in c_vs_a.verdict
    assert c_vs_a.p_holm is None and "p_holm" not in rows[1].record()


def test_a_family_of_tests_is_adjusted_and_the_verdict_says_what_survives():
    """Three variants significant alone at p 0.001, 0.02 and 0.04 stay significant as a
    family of three (Holm: 0.003, 0.04, 0.04); in a family of five, 0.02 becomes 0.08
    and its verdict says so. The baseline and a variant with no shared seed are not
    part of a family."""
    deltas = [[1.0, 2.0, 1.5], [1.0, 1.0, 1.0], [0.5, 0.5, 0.5]]
    tests = [judge("none", [], "base", BASE, "test", SignificanceSpec(), None)]
    for name, p, d in zip(("a", "b", "c"), (0.001, 0.02, 0.04), deltas):
        runs = [run(s, BASE[s - 1].splits["test"].bleu + x) for s, x in zip((1, 2, 3), d)]
        tests.append(judge(name, runs, "base", BASE, "test", SignificanceSpec(), p))
    adjust_family(tests, 0.05)
    none, a, b, c = tests
    assert [t.p_holm for t in (a, b, c)] == pytest.approx([0.003, 0.04, 0.04])
    assert a.significant_holm and a.verdict.endswith("all 3 seeds agree)")
    assert b.significant_holm and c.significant_holm  # 0.02 x 2, 0.04 x 1 < 0.05
    assert none.p_holm is None and "not compared" in none.verdict
    two_more = [dataclasses.replace(c, p_value=0.3) for _ in (1, 2)]
    adjust_family([a, b, c, *two_more], 0.05)  # b: 0.02 x 4 = 0.08 in a family of five
    assert b.significant and not b.significant_holm
    assert b.verdict.endswith("; as one of 5 tests (Holm) p 0.080, not significant")
