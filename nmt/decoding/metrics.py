"""sacreBLEU wrappers (Post 2018): corpus scores with their signatures; paired
bootstrap resampling over sentences (Koehn 2004) for confidence intervals and
p-values; and sacreBLEU's own paired tests (bootstrap resampling and approximate
randomisation, Riezler & Maxwell 2005) for BLEU, chrF and TER."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sacrebleu.metrics import BLEU, CHRF, TER

from nmt.data.corpus import read_input, read_lines, uneven
from nmt.errors import NmtError

# sacreBLEU's metrics by name; chrf++ is chrF with word bigrams (Popović 2017)
METRICS = {"bleu": BLEU, "chrf": CHRF, "chrf++": functools.partial(CHRF, word_order=2), "ter": TER}


@dataclass(frozen=True)
class Score:
    name: str
    score: float
    text: str  # sacreBLEU's own rendering, e.g. "BLEU = 34.70 65.1/40.2/..."
    signature: str


def corpus_score(metric: str, hyps: list[str], refs: list[list[str]]) -> Score:
    """Score ``hyps`` against one or more reference streams with sacreBLEU defaults
    (BLEU: cased, 13a tokenisation, exp smoothing)."""
    m = METRICS[metric]()
    result = m.corpus_score(hyps, refs)
    return Score(metric, float(result.score), str(result), str(m.get_signature()))


def bleu(hyps: list[str], refs: list[str]) -> float:
    return corpus_score("bleu", hyps, [refs]).score


def score_files(hyp_path: Path, ref_paths: list[Path], metrics: list[str]) -> list[Score]:
    """Score a hypothesis file (``-``: standard input, as sacreBLEU reads it) against
    reference files; counts must match and be non-zero. A metric named twice is
    scored once."""
    metrics = list(dict.fromkeys(metrics))
    unknown = [m for m in metrics if m not in METRICS]
    if unknown or not metrics:
        raise NmtError(
            f"--metrics: unknown {', '.join(unknown) or '(none given)'}; "
            f"valid: {', '.join(METRICS)}"
        )
    hyps = read_input(hyp_path)
    if not hyps:
        raise NmtError(f"{hyp_path}: empty file, nothing to score")
    refs = []
    for path in ref_paths:
        lines = read_lines(path)
        if len(lines) != len(hyps):
            raise uneven(hyp_path, len(hyps), path, len(lines))
        refs.append(lines)
    return [corpus_score(m, hyps, refs) for m in metrics]


# ------------------------------------------------------------------ bootstrap

NGRAMS = 4  # sacreBLEU's default max n-gram order


def sentence_stats(hyps: list[str], refs: list[str]) -> np.ndarray:
    """Per-sentence BLEU sufficient statistics, (N, 2 + 2·4): hypothesis length,
    reference length, n-gram matches and n-gram totals. Their column sums are the
    statistics sacreBLEU's corpus BLEU is computed from, so any subset or resample
    of sentences can be scored exactly without re-tokenising."""
    metric = BLEU(effective_order=True)  # changes sentence scores only, not the statistics
    rows = []
    for hyp, ref in zip(hyps, refs):
        s = metric.sentence_score(hyp, [ref])
        rows.append([s.sys_len, s.ref_len, *s.counts, *s.totals])
    return np.array(rows, dtype=np.int64).reshape(len(rows), 2 + 2 * NGRAMS)


def bleu_from_stats(stats: np.ndarray) -> np.ndarray:
    """Corpus BLEU (sacreBLEU's defaults: exp smoothing) of summed statistics.

    stats (..., 10) summed over sentences -> BLEU (...)."""
    flat = stats.reshape(-1, stats.shape[-1])
    out = [
        BLEU.compute_bleu(
            correct=row[2 : 2 + NGRAMS].tolist(),
            total=row[2 + NGRAMS :].tolist(),
            sys_len=int(row[0]),
            ref_len=int(row[1]),
            smooth_method="exp",
        ).score
        for row in flat
    ]
    return np.array(out, dtype=np.float64).reshape(stats.shape[:-1])


@dataclass(frozen=True)
class Bootstrap:
    """A system's seed-averaged BLEU, its 95 % percentile interval, and the two-sided
    paired-bootstrap p-value of its difference from the baseline (None for the
    baseline itself)."""

    bleu: float
    ci_low: float
    ci_high: float
    p_value: float | None


def paired_bootstrap(
    systems: dict[str, list[np.ndarray]], baseline: str, samples: int = 1000, seed: int = 12345
) -> dict[str, Bootstrap]:
    """Paired bootstrap resampling (Koehn 2004) over the test sentences.

    ``systems`` maps a name to one statistics array (N, 10) per training seed. Every
    system is scored on the *same* ``samples`` resamples of sentence indices; a system's
    score on a resample is its BLEU averaged over seeds. The p-value is two-sided:
    twice the smaller share of resamples in which the difference from the baseline has
    either sign, with add-one smoothing, capped at 1 (identical systems get 1).
    """
    n = next(iter(systems.values()))[0].shape[0]
    rng = np.random.default_rng(seed)
    # Each resample as sentence multiplicities, so resampled sums are one matmul.
    weights = np.stack(
        [np.bincount(rng.integers(0, n, n), minlength=n) for _ in range(samples)]
    )  # (samples, N)
    scores = {
        name: np.mean([bleu_from_stats(weights @ s) for s in per_seed], axis=0)  # (samples,)
        for name, per_seed in systems.items()
    }
    out = {}
    for name, per_seed in systems.items():
        observed = float(np.mean([bleu_from_stats(s.sum(0)) for s in per_seed]))
        low, high = np.percentile(scores[name], [2.5, 97.5])
        p = None
        if name != baseline and baseline in scores:
            diff = scores[name] - scores[baseline]
            tail = min(int((diff <= 0).sum()), int((diff >= 0).sum()))
            p = min(1.0, 2 * (tail + 1) / (samples + 1))
        out[name] = Bootstrap(observed, float(low), float(high), p)
    return out


# ------------------------------------------------------ sacreBLEU's paired tests


def paired_test(
    systems: dict[str, list[str]],
    refs: list[str],
    baseline: str,
    test: str = "bs",
    metrics: tuple[str, ...] = ("bleu",),
    samples: int = 0,
) -> dict[str, dict[str, float]]:
    """sacreBLEU's paired significance test of every system against ``baseline``:
    ``bs`` (paired bootstrap resampling, 1,000 resamples by default) or ``ar``
    (approximate randomisation, 10,000 trials), as ``sacrebleu --paired-bs`` /
    ``--paired-ar`` compute them (same seed, ``SACREBLEU_SEED``, default 12345).

    ``systems`` maps a name to its hypotheses, one per line of ``refs``. Returns
    {system: {metric: p-value}} for every system but the baseline.
    """
    from sacrebleu.significance import PairedTest

    named = [(baseline, systems[baseline])]
    named += [(name, hyps) for name, hyps in systems.items() if name != baseline]
    scorers = {m: METRICS[m](references=[refs]) for m in metrics}
    log = logging.getLogger("sacrebleu")  # it narrates every step at INFO
    level = log.level
    log.setLevel(logging.WARNING)
    try:
        test_ = PairedTest(named, scorers, references=None, test_type=test, n_samples=samples)
        _, table = test_()
    finally:
        log.setLevel(level)
    columns = [table[k] for k in table if k != "System"]  # one per metric, in order
    return {
        name: {m: float(column[i].p_value) for m, column in zip(metrics, columns)}
        for i, (name, _hyps) in enumerate(named)
        if i > 0
    }
