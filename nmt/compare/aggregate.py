"""From per-run analyses to per-variant figures: means and spreads over seeds, the
paired bootstrap against the baseline (and between the spec's contrasts), and BLEU by
source-length bucket."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from nmt.compare.analysis import RunAnalysis, SplitAnalysis
from nmt.compare.metrics import per_sentence
from nmt.compare.rows import ATTENTION_KEYS, ContrastRow, Row
from nmt.compare.significance import adjust_family, judge
from nmt.decoding.metrics import Bootstrap, bleu_from_stats, paired_bootstrap
from nmt.errors import NmtError
from nmt.inspection.diagnostics import (
    f_measure,
    frequency_labels,
    ratio,
    repetition,
)
from nmt.setup.compare import SignificanceSpec

EXAMPLES = 2  # sentences shown each way where a variant differs most from the baseline


def check_one_test_set(runs: dict[str, list[RunAnalysis]], splits: tuple[str, ...]) -> None:
    """The paired tests pair sentence i of every run with sentence i of every other:
    each split's runs must have been scored against the same references. Runs trained
    on different corpora (or on a changed copy of the test set) are refused, naming
    the first line that differs, before anything is written."""
    scored = [r for per_seed in runs.values() for r in per_seed]
    if not scored:
        return
    first = scored[0]
    for split in splits:
        for r in scored[1:]:
            a, b = first.splits[split].refs, r.splits[split].refs
            if a != b:
                line = next(
                    (i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b))
                )
                raise NmtError(
                    f"{split}: {r.run_dir} was scored against other references than "
                    f"{first.run_dir} (from line {line + 1}, of {len(b)} and {len(a)} lines); "
                    "a paired comparison needs one test set"
                )


def machine(where: dict[str, Any]) -> str:
    """A run's machine as summary.json's ``where`` names it: CPU model, cores, device."""
    return f"{where.get('cpu')} x{where.get('cores')} ({where.get('device')})"


def by_variant(
    runs: dict[str, list[RunAnalysis]], describe: Callable[[dict[str, Any]], str]
) -> dict[str, list[str]]:
    """What ``describe`` says of where each variant's runs trained (their summary.json's
    ``where``: a machine, library versions), each saying once; another decoding of a run
    (``VARIANT@TAG``, the same run directory) is its run's, not listed again, and a
    variant whose runs say nothing (from before ``where`` was kept) is left out."""
    seen: set[Path] = set()
    found: dict[str, list[str]] = {}
    for variant, rs in runs.items():
        own = [r for r in rs if r.run_dir not in seen and "where" in r.train]
        seen.update(r.run_dir for r in rs)
        if said := sorted({text for r in own if (text := describe(r.train["where"]))}):
            found[variant] = said
    return found


def machine_notes(runs: dict[str, list[RunAnalysis]]) -> list[str]:
    """What makes runs hard to compare where they ran: runs from more than one
    machine, whose timing columns (train min, tokens/s, sent/s) differ and whose
    scores may too (one recipe and seed can train to other weights on another CPU or
    GPU: their kernels round differently), named variant by variant; runs trained
    with other versions of the libraries their figures depend on
    (:func:`mixed_libraries`), or with other kernels or thread counts
    (:data:`NUMERICS`); and runs begun under different loads (the load average as each started:
    runs trained side by side share the cores, a run alone does not)."""
    wheres = [r.train["where"] for rs in runs.values() for r in rs if "where" in r.train]
    notes = []
    machines = sorted({machine(w) for w in wheres})
    if len(machines) > 1:
        each = "; ".join(
            f"{v} on {' and '.join(ms)}" for v, ms in by_variant(runs, machine).items()
        )
        notes.append(
            f"the timing columns mix machines: {'; '.join(machines)}; and one recipe and "
            "seed can train to other weights on another machine, so a contrast between "
            f"runs of different machines mixes in the machine ({each})"
        )
    if mixed := mixed_libraries(wheres):
        names = list(mixed)
        each = "; ".join(
            f"{v} with {' and '.join(said)}"
            for v, said in by_variant(runs, lambda w: library_versions(w, names)).items()
        )
        versions = "; ".join(f"{name} {' and '.join(found)}" for name, found in mixed.items())
        notes.append(
            f"the runs were trained with other library versions ({versions}), which can move "
            f"their scores as another machine can ({each})"
        )
    for what, why, describe in NUMERICS:
        if len(found := sorted({describe(w) for w in wheres} - {""})) > 1:
            each = "; ".join(
                f"{v} with {' and '.join(d)}" for v, d in by_variant(runs, describe).items()
            )
            notes.append(
                f"the runs {what} ({' and '.join(found)}; {why}), which alone trains other "
                f"losses on one machine, so it can move their scores ({each})"
            )
    loads = [w["load_at_start"] for w in wheres if isinstance(w.get("load_at_start"), float)]
    if loads and max(loads) - min(loads) >= 1:
        notes.append(
            f"the timing columns mix loads: runs began with a load average of "
            f"{min(loads):.1f} to {max(loads):.1f} (work besides them on the same cores)"
        )
    return notes


def mixed_libraries(wheres: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The libraries of summary.json's ``where`` (nmt.setup.device.LIBRARIES) that the
    runs recorded at more than one version, each with its versions, sorted; empty
    where they agree (runs from before the versions were kept, or whose record is
    damaged, say nothing)."""
    versions: dict[str, set[str]] = {}
    for where in wheres:
        libraries = where.get("libraries")
        for name, version in libraries.items() if isinstance(libraries, dict) else ():
            versions.setdefault(str(name), set()).add(str(version))
    return {name: sorted(found) for name, found in versions.items() if len(found) > 1}


def kernels_of(where: dict[str, Any]) -> str:
    """The instruction set of PyTorch's CPU kernels a run recorded ("" where it did not)."""
    kernels = where.get("kernels")
    return kernels if isinstance(kernels, str) else ""


def cpu_threads_of(where: dict[str, Any]) -> str:
    """The threads a run on the CPU trained with, as "2 threads" ("" for a run on a
    GPU, whose sums the CPU's threads do not split, or one that did not record them)."""
    threads = where.get("threads")
    on_cpu = where.get("device") == "cpu" and type(threads) is int
    return f"{threads} thread{'s' * (threads != 1)}" if on_cpu else ""


# what a run trains with that alone changes its losses on one machine (docs/results.md,
# "What moves a seed's figures between machines"): what a report says, why, and the
# value of one run's ``where``
NUMERICS: list[tuple[str, str, Callable[[dict[str, Any]], str]]] = [
    (
        "used PyTorch's CPU kernels for more than one instruction set",
        "ATen picks one for the CPU, ATEN_CPU_CAPABILITY overrides it",
        kernels_of,
    ),
    (
        "trained on the CPU with more than one thread count",
        "nmt compare gives a run the threads that --jobs leave it",
        cpu_threads_of,
    ),
]


def library_versions(where: dict[str, Any], names: list[str]) -> str:
    """The versions of ``names`` in one run's ``where``, as "sentencepiece 0.2.0"
    (the libraries it did not record, or a damaged record, left out)."""
    libraries = where.get("libraries")
    if not isinstance(libraries, dict):
        return ""
    return ", ".join(f"{name} {libraries[name]}" for name in names if name in libraries)


def bucket_labels(edges: tuple[int, ...]) -> list[str]:
    """(10, 20) -> ["1-10", "11-20", "21+"] (source words)."""
    lows = (1, *(e + 1 for e in edges))
    return [f"{lo}-{hi}" for lo, hi in zip(lows, edges)] + [f"{lows[-1]}+"]


def bucket_index(src_words: np.ndarray, edges: tuple[int, ...]) -> np.ndarray:
    """(N,) source lengths in words -> (N,) bucket of each (0 .. len(edges))."""
    return np.searchsorted(np.array(edges), src_words, side="left")


def bucket_bleu(stats: np.ndarray, src_words: np.ndarray, edges: tuple[int, ...]) -> list[float]:
    """Corpus BLEU of the sentences in each source-length bucket (NaN where empty)."""
    which = bucket_index(src_words, edges)  # (N,)
    out = []
    for b in range(len(edges) + 1):
        rows = stats[which == b]
        out.append(float(bleu_from_stats(rows.sum(0))) if len(rows) else math.nan)
    return out


def sentence_pairs(part: SplitAnalysis) -> dict[str, np.ndarray]:
    """Each diagnostic's per-sentence (N,2) numerators and denominators; the length
    ratio's are BLEU's own hypothesis and reference lengths."""
    return {"length_ratio": part.stats[:, :2].astype(np.float64), **part.sentences}


def caption_figures(captions: list[np.ndarray]) -> tuple[list[float | None], list[float]]:
    """Each caption's covered share and recall, from each seed's (N,K,2): the mean over
    sentences, then over seeds; covered only over the seeds whose attention was read
    (all NaN: analysed without a checkpoint), None where none was."""
    recall = np.nanmean(np.stack([c[..., 1] for c in captions]), axis=1).mean(0)  # (K,)
    read = [c[..., 0] for c in captions if not np.isnan(c[..., 0]).all()]
    covered = np.nanmean(np.stack(read), axis=1).mean(0) if read else [None] * len(recall)
    return [None if x is None else float(x) for x in covered], [float(x) for x in recall]


def diagnostic_figures(
    parts: list[SplitAnalysis], edges: tuple[int, ...]
) -> tuple[dict[str, float], list[dict[str, float]]]:
    """Each diagnostic over the split and per source-length bucket, the mean over seeds
    of each seed's ratio of sums (NaN where a bucket is empty)."""
    whole: dict[str, float] = {}
    buckets: list[dict[str, float]] = [{} for _ in range(len(edges) + 1)]
    seeds = [(sentence_pairs(p), bucket_index(p.src_words, edges)) for p in parts]
    for key in per_sentence():
        per_seed = [(pairs[key], which) for pairs, which in seeds if key in pairs]
        if not per_seed:
            continue
        whole[key] = _mean([ratio(pairs) for pairs, _ in per_seed])
        for b, figures in enumerate(buckets):
            figures[key] = _mean([ratio(pairs[which == b]) for pairs, which in per_seed])
    return whole, buckets


def differs_most(
    mine: SplitAnalysis, base: SplitAnalysis, k: int = EXAMPLES
) -> list[dict[str, Any]]:
    """The ``k`` sentences where a variant's (first seed's) sentence BLEU falls furthest
    below the baseline's (first seed's), and the ``k`` where it rises furthest above, as
    compare-mt shows them."""
    delta = bleu_from_stats(mine.stats) - bleu_from_stats(base.stats)  # (N,) sentence BLEU
    order = np.argsort(delta, kind="stable")
    chosen = [*order[:k], *order[::-1][:k]]
    return [
        {
            "line": int(i) + 1,
            "delta": float(delta[i]),
            "src": mine.src[i] if mine.src else "",
            "ref": mine.refs[i],
            "baseline": base.hyps[i],
            "hyp": mine.hyps[i],
        }
        for i in dict.fromkeys(chosen)
        if delta[i] != 0
    ]


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else math.nan


def _std(values: list[float]) -> float:
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def summarise(
    runs: dict[str, list[RunAnalysis]],
    splits: tuple[str, ...],
    baseline: str,
    samples: int,
    edges: tuple[int, ...],
    significance: SignificanceSpec,
) -> list[Row]:
    """One row per (variant, split) over the variant's finished seeds; variants without
    any finished seed are left out here (the report lists them as failed). A split's
    tests against the baseline are one family for Holm's adjustment."""
    rows: list[Row] = []
    for split in splits:
        first = len(rows)
        systems = {
            name: [r.splits[split].stats for r in per_seed]
            for name, per_seed in runs.items()
            if per_seed
        }
        boot = paired_bootstrap(systems, baseline, samples) if systems else {}
        for name, per_seed in runs.items():
            if per_seed:
                rows.append(
                    variant_row(runs, name, split, baseline, boot[name], edges, significance)
                )
        adjust_family([r.test for r in rows[first:] if r.test is not None], significance.alpha)
    return rows


def length_bucket_figures(
    parts: list[SplitAnalysis], edges: tuple[int, ...]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The diagnostics over the whole split, and per source-length bucket its
    sentences, BLEU (the seeds' mean and range, for the plot's band) and diagnostics."""
    per_bucket = np.array([bucket_bleu(p.stats, p.src_words, edges) for p in parts])  # (seeds, B)
    counts = np.bincount(bucket_index(parts[0].src_words, edges), minlength=len(edges) + 1)
    whole, by_bucket = diagnostic_figures(parts, edges)
    buckets = {
        label: {
            "sentences": int(n),
            "bleu": float(np.mean(col)),
            "bleu_min": float(np.min(col)),
            "bleu_max": float(np.max(col)),
            **figures,
        }
        for label, n, col, figures in zip(bucket_labels(edges), counts, per_bucket.T, by_bucket)
    }
    return whole, buckets


def variant_row(
    runs: dict[str, list[RunAnalysis]],
    name: str,
    split: str,
    baseline: str,
    boot: Bootstrap,
    edges: tuple[int, ...],
    significance: SignificanceSpec,
) -> Row:
    """Variant ``name`` on ``split``: its figures over seeds, tested against the baseline."""
    per_seed = runs[name]
    parts = [r.splits[split] for r in per_seed]
    bleus, chrfs = [p.bleu for p in parts], [p.chrf for p in parts]
    attention = {}
    for key in ATTENTION_KEYS:
        values = [p.attention[key] for p in parts if key in p.attention]
        attention[key] = _mean(values) if values else None
    whole, buckets = length_bucket_figures(parts, edges)
    row = Row(
        variant=name,
        split=split,
        seeds=len(per_seed),
        is_baseline=name == baseline,
        bleu=_mean(bleus),
        bleu_std=_std(bleus),
        bleu_ci_low=boot.ci_low,
        bleu_ci_high=boot.ci_high,
        chrf=_mean(chrfs),
        chrf_std=_std(chrfs),
        params=per_seed[0].params,
        train_steps=_mean([r.train["steps"] for r in per_seed]),
        train_minutes=_mean([r.train["seconds"] / 60 for r in per_seed]),
        tokens_per_s=_mean([r.train["tokens_per_s"] for r in per_seed]),
        sentences_per_s=_mean([p.sentences_per_s for p in parts]),
        attention=attention,
        diagnostics=whole,
        length_buckets=buckets,
        ref_repetition=ratio(np.array([repetition(r) for r in parts[0].refs])),
        signatures=dict(parts[0].signatures),
        scores={
            m: (_mean([p.scores[m] for p in parts]), _std([p.scores[m] for p in parts]))
            for m in parts[0].scores
        },
    )
    words = [p.words for p in parts if p.words is not None]
    if words:
        f = np.mean([f_measure(w) for w in words], axis=0)
        row.word_f = dict(zip(frequency_labels(), map(float, f)))
        row.word_counts = dict(zip(frequency_labels(), map(int, words[0][:, 1])))
    captions = [p.captions for p in parts if p.captions is not None]
    if captions:  # (N,K,2) each: the mean over sentences, then over seeds
        row.caption_covered, row.caption_recall = caption_figures(captions)
    base_runs = runs.get(baseline, [])
    if name != baseline:
        if base_runs:
            row.differs_most = differs_most(parts[0], base_runs[0].splits[split])
        row.test = judge(name, per_seed, baseline, base_runs, split, significance, boot.p_value)
    return row


def contrast_rows(
    runs: dict[str, list[RunAnalysis]],
    splits: tuple[str, ...],
    contrasts: tuple[tuple[str, ...], ...],
    samples: int,
    significance: SignificanceSpec,
) -> list[ContrastRow]:
    """One row per (split, [variant, reference]) of the spec's ``contrasts``, judged as
    a variant is against the baseline; a split's contrasts are one family for Holm's
    adjustment. A pair with a side that has no finished run is reported, not tested."""
    rows = []
    for split in splits:
        mine = []
        for name, reference in contrasts:
            ours, theirs = runs.get(name, []), runs.get(reference, [])
            p = None
            if ours and theirs and significance.test == "bootstrap":
                systems = {
                    reference: [r.splits[split].stats for r in theirs],
                    name: [r.splits[split].stats for r in ours],
                }
                p = paired_bootstrap(systems, reference, samples)[name].p_value
            test = judge(name, ours, reference, theirs, split, significance, p)
            mine.append(ContrastRow(split, name, reference, test))
        adjust_family([c.test for c in mine], significance.alpha)
        rows += mine
    return rows
