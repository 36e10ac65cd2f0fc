"""A study's results, typed: one variant on one split (:class:`Row`), a contrast between
two variants (:class:`ContrastRow`), an ensemble of seeds (:class:`EnsembleRow`), the
test behind each verdict (:class:`Decision`); and :func:`table`, the one renderer every
table of the report goes through.

``results.json``, ``results.csv`` and ``report.html`` hold each row as the flat record
of :meth:`Row.record` (the file format of earlier versions, key for key).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

ATTENTION_KEYS = ("entropy", "peak_distance", "center_spread", "center_distance", "aer")


@dataclass
class Decision:
    """A variant against a reference (the baseline, or a contrast's other side) under
    the rule of nmt.compare.significance. ``p_holm``/``significant_holm`` are set once
    the test's family is known (:func:`nmt.compare.significance.adjust_family`)."""

    p_value: float | None
    p_values: dict[str, float]
    seed_deltas: list[float]
    signs_agree: bool
    significant: bool
    verdict: str
    p_holm: float | None = None
    significant_holm: bool | None = None

    def decision(self) -> dict[str, Any]:
        return {
            "p_value": self.p_value,
            "p_values": self.p_values,
            "seed_deltas": self.seed_deltas,
            "signs_agree": self.signs_agree,
            "significant": self.significant,
            "verdict": self.verdict,
        }

    def holm(self) -> dict[str, Any]:
        """The family's adjustment, once made."""
        if self.p_holm is None:
            return {}
        return {"p_holm": self.p_holm, "significant_holm": self.significant_holm}


@dataclass
class Row:
    """One variant on one split, over its finished seeds: means and spreads, the
    attention figures (None where not read), the diagnostics of
    nmt.inspection.diagnostics, the figures per source-length bucket, and the test
    against the baseline (None for the baseline itself)."""

    variant: str
    split: str
    seeds: int
    is_baseline: bool
    bleu: float
    bleu_std: float
    bleu_ci_low: float
    bleu_ci_high: float
    chrf: float
    chrf_std: float
    params: int
    train_steps: float
    train_minutes: float
    tokens_per_s: float
    sentences_per_s: float
    attention: dict[str, float | None]  # ATTENTION_KEYS
    diagnostics: dict[str, float]  # the metrics measured per sentence (nmt.compare.metrics)
    length_buckets: dict[str, dict[str, float]]  # label -> sentences, bleu, range, diagnostics
    ref_repetition: float
    signatures: dict[str, str]  # sacreBLEU's, of bleu, chrf and each of scores
    scores: dict[str, tuple[float, float]] = field(default_factory=dict)  # chrf++, ter: mean, std
    word_f: dict[str, float] | None = None  # by the word's training frequency
    word_counts: dict[str, int] | None = None
    caption_covered: list[float | None] | None = None  # a joined split: per caption
    caption_recall: list[float] | None = None
    differs_most: list[dict[str, Any]] | None = None  # sentences against the baseline
    test: Decision | None = None

    @property
    def p_value(self) -> float | None:
        return None if self.test is None else self.test.p_value

    @property
    def significant(self) -> bool:
        return self.test is not None and self.test.significant

    def figure(self, key: str) -> Any:
        """A number of the flat record by its name (a column's key)."""
        return self.record().get(key)

    def record(self) -> dict[str, Any]:
        """The flat record results.json, results.csv and report.html hold."""
        scores: dict[str, float] = {}
        for metric, (mean, std) in self.scores.items():
            scores |= {metric: mean, f"{metric}_std": std}
        out: dict[str, Any] = {
            "variant": self.variant,
            "split": self.split,
            "seeds": self.seeds,
            "is_baseline": self.is_baseline,
            "bleu": self.bleu,
            "bleu_std": self.bleu_std,
            "bleu_ci_low": self.bleu_ci_low,
            "bleu_ci_high": self.bleu_ci_high,
            "p_value": self.p_value,
            "chrf": self.chrf,
            "chrf_std": self.chrf_std,
            **scores,
            "params": self.params,
            "train_steps": self.train_steps,
            "train_minutes": self.train_minutes,
            "tokens_per_s": self.tokens_per_s,
            "sentences_per_s": self.sentences_per_s,
            **self.attention,
            **self.diagnostics,
            "length_buckets": self.length_buckets,
        }
        if self.word_f is not None:
            out |= {"word_f": self.word_f, "word_counts": self.word_counts}
        out["ref_repetition"] = self.ref_repetition
        if self.caption_recall is not None:
            out |= {"caption_covered": self.caption_covered, "caption_recall": self.caption_recall}
        if self.differs_most is not None:
            out["differs_most"] = self.differs_most
        if self.test is not None:
            out |= self.test.decision()
        out |= {f"{m}_signature": s for m, s in self.signatures.items()}
        return out | (self.test.holm() if self.test is not None else {})


@dataclass
class ContrastRow:
    """A spec's contrast on one split: ``variant`` against ``reference``."""

    split: str
    variant: str
    reference: str
    test: Decision

    def record(self) -> dict[str, Any]:
        sides = {"split": self.split, "variant": self.variant, "reference": self.reference}
        return sides | self.test.decision() | self.test.holm()


@dataclass
class EnsembleRow:
    """A variant's seeds as one ensemble, beside the mean of the single seeds."""

    variant: str
    split: str
    seeds: int
    bleu: float
    chrf: float
    seeds_bleu: float
    seeds_chrf: float
    gain: float = field(init=False)

    def __post_init__(self) -> None:
        self.gain = self.bleu - self.seeds_bleu

    def record(self) -> dict[str, Any]:
        return dict(vars(self))


R = TypeVar("R")


@dataclass(frozen=True)
class Column(Generic[R]):
    """A table's column: its header, how a row's cell reads, and its alignment."""

    header: str
    cell: Callable[[R], str]
    numeric: bool = True


def number(value: Any, fmt: str) -> str:
    """A figure as a cell: a dash where it was not measured (None or NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return fmt.format(value)


def p_text(p: float | None) -> str:
    """0.0123 -> "0.012"; below 0.001 -> "<0.001"; none -> "–"."""
    if p is None:
        return "–"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def table(columns: Sequence[Column[R]], rows: Sequence[R], extra: Sequence[list[str]] = ()) -> str:
    """A markdown table: a header, an alignment line, a line per row (``extra``:
    lines given as cells, such as a failed run's)."""
    lines = ["| " + " | ".join(c.header for c in columns) + " |"]
    lines.append("|" + "|".join("---:" if c.numeric else "---" for c in columns) + "|")
    lines += ["| " + " | ".join(c.cell(row) for c in columns) + " |" for row in rows]
    lines += ["| " + " | ".join(cells) + " |" for cells in extra]
    return "\n".join(lines)


def plain(value: Any) -> Any:
    """``value`` as JSON holds it, for every file a study writes (results.json, the
    page's data): NaN and infinities -> None, numpy numbers -> Python's, paths ->
    strings, tuples -> lists, keys -> strings."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value
