"""Sentence statistics add up to sacreBLEU's corpus BLEU; the paired bootstrap behaves."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.decoding.metrics import (
    bleu,
    bleu_from_stats,
    paired_bootstrap,
    paired_test,
    sentence_stats,
)

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", ".", "big"]
sentence = st.lists(st.sampled_from(WORDS), min_size=0, max_size=12).map(" ".join)


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(sentence, sentence), min_size=1, max_size=20))
def test_summed_sentence_stats_give_corpus_bleu(pairs):
    hyps, refs = [h for h, _ in pairs], [r for _, r in pairs]
    stats = sentence_stats(hyps, refs)
    assert stats.shape == (len(pairs), 10)
    assert np.isclose(bleu_from_stats(stats.sum(0)), bleu(hyps, refs))


def corpus(seed: int, n: int = 60) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)
    refs = [" ".join(rng.choice(WORDS, size=rng.integers(4, 12))) for _ in range(n)]
    return refs, [r.split() for r in refs]


def test_identical_systems_have_p_one():
    refs, _ = corpus(0)
    hyps = [r.replace("cat", "dog") for r in refs]
    stats = sentence_stats(hyps, refs)
    result = paired_bootstrap({"a": [stats], "b": [stats.copy()]}, "a", samples=300)
    assert result["a"].p_value is None
    assert result["b"].p_value == 1.0
    assert result["a"].ci_low <= result["a"].bleu <= result["a"].ci_high


def test_better_on_every_sentence_is_significant():
    refs, words = corpus(1)
    worse = [" ".join(w[: len(w) // 2]) for w in words]  # half of each reference
    better = [" ".join(w[: len(w) - 1]) for w in words]  # all but the last word
    base, good = sentence_stats(worse, refs), sentence_stats(better, refs)
    result = paired_bootstrap({"base": [base], "good": [good]}, "base", samples=300)
    assert result["good"].bleu > result["base"].bleu
    # better in every resample: the smallest two-sided p, 2·(0 + 1)/(300 + 1), both ways
    assert result["good"].p_value == pytest.approx(2 / 301)
    swapped = paired_bootstrap({"good": [good], "base": [base]}, "good", samples=300)
    assert swapped["base"].p_value == pytest.approx(2 / 301)
    assert result["good"].ci_low > result["base"].ci_high  # disjoint intervals here


def test_seeds_are_averaged():
    refs, words = corpus(2)
    a = sentence_stats([" ".join(w[:-1]) for w in words], refs)
    b = sentence_stats([" ".join(w[:-2]) for w in words], refs)
    result = paired_bootstrap({"x": [a, b]}, "x", samples=100)
    expected = (bleu_from_stats(a.sum(0)) + bleu_from_stats(b.sum(0))) / 2
    assert np.isclose(result["x"].bleu, expected)


@pytest.mark.slow  # the sacrebleu command in a subprocess: a second or more
@pytest.mark.parametrize("test", ["bs", "ar"])
def test_paired_test_p_values_equal_the_sacrebleu_command(tmp_path, test):
    """One pair of systems: our p-values for BLEU, chrF and TER are the ones
    `sacrebleu REF -i BASE SYS --paired-bs` (or --paired-ar) prints."""
    refs = (Path(__file__).parents[2] / "data/toy/test.tgt").read_text().splitlines()[:150]
    base = [" ".join(w if i % 5 else "x" for i, w in enumerate(r.split())) for r in refs]
    system = [r if n % 3 else r.rsplit(" ", 1)[0] for n, r in enumerate(refs)]
    for name, lines in (("ref", refs), ("base", base), ("sys", system)):
        (tmp_path / f"{name}.txt").write_text("\n".join(lines) + "\n")
    samples = 200 if test == "ar" else 1000
    out = subprocess.run(
        [sys.executable, "-m", "sacrebleu", "ref.txt", "-i", "base.txt", "sys.txt",
         f"--paired-{test}", f"--paired-{test}-n", str(samples), "-m", "bleu", "chrf", "ter",
         "-f", "text"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    expected = [float(p) for p in re.findall(r"\(p = ([0-9.]+)\)", out)]
    ours = paired_test(
        {"base": base, "sys": system}, refs, "base", test, ("bleu", "chrf", "ter"), samples
    )["sys"]
    assert len(expected) == 3
    assert [round(ours[m], 4) for m in ("bleu", "chrf", "ter")] == expected
