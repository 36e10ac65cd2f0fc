"""A study's row per variant: the seeds' mean and spread, and BLEU by source length."""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
import pytest

from nmt.compare.aggregate import summarise
from nmt.compare.analysis import RunAnalysis, SplitAnalysis
from nmt.decoding.metrics import bleu, corpus_score, sentence_stats
from nmt.setup.compare import SignificanceSpec
from tests.helpers import noisy

RNG = np.random.default_rng(0)
WORDS = [f"w{i}" for i in range(30)]
REFS = [" ".join(RNG.choice(WORDS, int(n))) for n in RNG.integers(3, 12, 40)]
SRC_WORDS = RNG.integers(1, 12, 40)  # (N,) source length of each sentence in words


def analysed(seed: int, hyps: list[str]) -> RunAnalysis:
    part = SplitAnalysis(
        bleu=bleu(hyps, REFS), chrf=corpus_score("chrf", hyps, [REFS]).score,
        signatures={"bleu": "", "chrf": ""}, sentences_per_s=10.0 * seed, hyps=hyps,
        refs=REFS, stats=sentence_stats(hyps, REFS), src_words=SRC_WORDS, attention={},
        scores={"chrf++": corpus_score("chrf++", hyps, [REFS]).score},
    )  # fmt: skip
    train = {"steps": 100 * seed, "seconds": 60.0 * seed, "tokens_per_s": 1.0}
    return RunAnalysis("v", seed, Path("."), 1234, train, [], {"test": part})


def test_a_row_holds_the_seed_mean_and_sample_std_and_bleu_by_source_length():
    """Written out with sacreBLEU on each seed's output: BLEU and chrF are the mean over
    seeds with the sample standard deviation (n − 1), and each length bucket's BLEU is
    the mean over seeds of the corpus BLEU of that bucket's sentences."""
    hyps = {seed: noisy(REFS, keep, seed) for seed, keep in ((1, 0.5), (2, 0.7), (3, 0.6))}
    runs = {"v": [analysed(seed, h) for seed, h in hyps.items()]}
    row = summarise(runs, ("test",), "v", 100, (5,), SignificanceSpec())[0]
    bleus = [bleu(h, REFS) for h in hyps.values()]
    chrfs = [corpus_score("chrf", h, [REFS]).score for h in hyps.values()]
    assert row.bleu == pytest.approx(statistics.mean(bleus))
    assert row.bleu_std == pytest.approx(statistics.stdev(bleus))
    assert row.chrf == pytest.approx(statistics.mean(chrfs))
    assert row.chrf_std == pytest.approx(statistics.stdev(chrfs))
    for label, inside in (("1-5", SRC_WORDS <= 5), ("6+", SRC_WORDS > 5)):
        pick = np.flatnonzero(inside)
        per_seed = [bleu([h[i] for i in pick], [REFS[i] for i in pick]) for h in hyps.values()]
        bucket = row.length_buckets[label]
        assert bucket["sentences"] == len(pick)
        assert bucket["bleu"] == pytest.approx(statistics.mean(per_seed))
    assert (row.seeds, row.params, row.train_steps) == (3, 1234, 200)
    chrf_pp = [corpus_score("chrf++", h, [REFS]).score for h in hyps.values()]
    assert row.scores["chrf++"] == pytest.approx(
        (statistics.mean(chrf_pp), statistics.stdev(chrf_pp))
    )
    assert row.train_minutes == pytest.approx(2.0)
    assert row.sentences_per_s == pytest.approx(20.0)


def test_one_seed_has_no_spread():
    row = summarise(
        {"v": [analysed(1, noisy(REFS, 0.5, 1))]}, ("test",), "v", 100, (5,), SignificanceSpec()
    )[0]
    assert row.bleu_std == 0.0 and row.chrf_std == 0.0


def test_diagnostics_are_ratios_of_sums_per_seed_then_the_mean_over_seeds():
    """The length ratio written out as hypothesis words over reference words (13a
    tokens), per bucket and over the split; a per-sentence diagnostic likewise from its
    (numerator, denominator) pairs; each the mean over seeds of a seed's ratio."""
    hyps = {seed: noisy(REFS, keep, seed) for seed, keep in ((1, 0.5), (2, 0.9))}
    runs = {"v": [analysed(seed, h) for seed, h in hyps.items()]}
    pairs = {1: np.array([[1, 2]] * 40, float), 2: np.array([[0, 2]] * 20 + [[2, 2]] * 20, float)}
    for run in runs["v"]:
        run.splits["test"].sentences = {"dropped": pairs[run.seed]}
    row = summarise(runs, ("test",), "v", 100, (5,), SignificanceSpec())[0]

    def ratio(h, pick):
        return sum(len(h[i].split()) for i in pick) / sum(len(REFS[i].split()) for i in pick)

    every = range(len(REFS))
    assert row.diagnostics["length_ratio"] == pytest.approx(
        statistics.mean(ratio(h, every) for h in hyps.values())
    )
    assert row.diagnostics["dropped"] == pytest.approx((0.5 + 0.5) / 2)
    for label, inside in (("1-5", SRC_WORDS <= 5), ("6+", SRC_WORDS > 5)):
        pick = np.flatnonzero(inside)
        bucket = row.length_buckets[label]
        assert bucket["length_ratio"] == pytest.approx(
            statistics.mean(ratio(h, pick) for h in hyps.values())
        )
        second = (pick >= 20).mean()  # seed 2's bucket share of sentences with 2 of 2 dropped
        assert bucket["dropped"] == pytest.approx((0.5 + second) / 2)
    assert "repetition" not in row.diagnostics  # not measured: absent, not zero
