"""Is a variant's difference from the baseline real, or seed noise?

A difference counts as significant only when both hold (docs/compare.md):
1. the paired test on the test sentences gives p < alpha: Koehn's (2004) paired
   bootstrap on the seed-averaged BLEU, or sacreBLEU's paired bootstrap or
   approximate randomisation (Riezler & Maxwell 2005) on the seeds pooled — each
   seed's test set appended, the variant's seed k paired with the baseline's;
2. every seed agrees in sign: the variant's seed k scores on the same side of the
   baseline's seed k for every seed the two share. A test over sentences cannot see
   how much a result moves with the training seed; a difference whose sign flips
   with the seed is within seed noise, however small its p.
With one shared seed the second condition cannot be checked, and no verdict is given.

The same rule judges a spec's ``contrasts`` (any variant against any other, e.g. each
kind with and without a training option). A study tests several claims at once, so each
family of tests (a split's tests against the baseline; its contrasts) also gets Holm's
adjusted p-values, and a verdict that holds only test by test says so.
"""

from __future__ import annotations

import numpy as np

from nmt.compare.analysis import RunAnalysis
from nmt.compare.rows import Decision, p_text
from nmt.decoding.metrics import corpus_score, paired_test
from nmt.setup.compare import SignificanceSpec

NAMES = {"bleu": "BLEU", "chrf": "chrF", "chrf++": "chrF++", "ter": "TER"}


def seed_score(run: RunAnalysis, split: str, metric: str) -> float:
    part = run.splits[split]
    if metric == "bleu":
        return part.bleu
    if metric == "chrf":
        return part.chrf
    return corpus_score(metric, part.hyps, [part.refs]).score


def judge(
    name: str,
    runs: list[RunAnalysis],
    baseline: str,
    baseline_runs: list[RunAnalysis],
    split: str,
    spec: SignificanceSpec,
    bootstrap_p: float | None,
) -> Decision:
    """The p-values, per-seed differences and verdict of variant ``name`` on ``split``."""
    metric = spec.metrics[0]
    mine = {r.seed: r for r in runs}
    theirs = {r.seed: r for r in baseline_runs}
    shared = sorted(set(mine) & set(theirs))
    deltas = [
        seed_score(mine[s], split, metric) - seed_score(theirs[s], split, metric) for s in shared
    ]
    if spec.test == "bootstrap":
        p_values = {"bleu": bootstrap_p} if bootstrap_p is not None else {}
    elif shared:
        refs = [line for _ in shared for line in mine[shared[0]].splits[split].refs]
        pooled = {
            label: [line for s in shared for line in side[s].splits[split].hyps]
            for label, side in ((baseline, theirs), (name, mine))
        }
        test = spec.test.removeprefix("paired_")
        p_values = paired_test(pooled, refs, baseline, test, spec.metrics, spec.samples)[name]
    else:
        p_values = {}
    p = p_values.get(metric)
    agree = bool(deltas) and (all(d > 0 for d in deltas) or all(d < 0 for d in deltas))
    significant = p is not None and p < spec.alpha and agree and len(shared) >= 2
    words = verdict(name, baseline, NAMES[metric], deltas, p, significant, spec.alpha)
    return Decision(p, p_values, deltas, agree, significant, words)


def verdict(
    name: str,
    baseline: str,
    metric: str,
    deltas: list[float],
    p: float | None,
    significant: bool,
    alpha: float,
) -> str:
    """One sentence in words, e.g. "local_m: −1.20 BLEU against global, significant
    (p 0.003; all 3 seeds agree)"."""
    if not deltas or p is None:
        return f"{name}: no seed in common with {baseline}, not compared"
    mean = float(np.mean(deltas))
    head = f"{name}: {mean:+.2f} {metric} against {baseline}"
    shown = p_text(p)
    if len(deltas) < 2:
        return f"{head} on one seed (p {shown}): seed noise not measured, no verdict"
    if significant and len(deltas) == 2:  # two signs agree by chance half the time
        return (
            f"{head}, significant on two seeds only (p {shown}; both agree, which two "
            "seeds would do by chance one time in two: a weak test; three or more seeds "
            "make the seed rule count)"
        )
    if significant:
        return f"{head}, significant (p {shown}; all {len(deltas)} seeds agree)"
    per_seed = ", ".join(f"{d:+.2f}" for d in deltas)
    if p < alpha:
        return f"{head}, within seed noise: p {shown}, but the seeds disagree ({per_seed})"
    return f"{head}, not significant (p {shown}; per seed {per_seed})"


def holm(p_values: list[float]) -> list[float]:
    """Holm's (1979) step-down adjustment of m p-values: the k-th smallest (k from 0)
    times m − k, made non-decreasing in that order and capped at 1. Adjusted p < alpha
    keeps the chance of *any* false rejection among the m tests below alpha."""
    out = [0.0] * len(p_values)
    running = 0.0
    for rank, i in enumerate(sorted(range(len(p_values)), key=p_values.__getitem__)):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        out[i] = running
    return out


def adjust_family(tests: list[Decision], alpha: float) -> None:
    """Give the ``tests`` of one family ``p_holm`` and ``significant_holm`` (those with
    a p-value); a verdict significant only test by test says so."""
    tested = [t for t in tests if t.p_value is not None]
    for test, adjusted in zip(tested, holm([t.p_value for t in tested])):
        test.p_holm = adjusted
        test.significant_holm = test.significant and adjusted < alpha
        if test.significant and not test.significant_holm:
            test.verdict += (
                f"; as one of {len(tested)} tests (Holm) p {p_text(adjusted)}, not significant"
            )
