"""The study's metric table: every figure a study reports per variant and split,
declared once (its key, header, digits, how it is measured, where it is shown), in the
order results.csv lists them. The terminal table, report.md's tables, results.csv and
report.html read their columns from :data:`METRICS`; results.json holds every figure of
a row under its key.

How a figure is measured (``Metric.measured``) decides how it is reduced over seeds:

- ``"score"``: a corpus score of each seed's translations, mean ± standard deviation
  over seeds (BLEU, chrF, sacreBLEU's other scores), tested by nmt.compare.significance;
- ``"run"``: read from each run's records (size, training and decoding cost), the mean;
- ``"attention"``: read from the cross-attention while the model reads the
  references (nmt.compare.analysis), the mean;
- ``"sentence"``: a (numerator, denominator) pair per sentence of each seed's
  translations, a ratio of sums per seed (over the split, and per source-length
  bucket), the mean over seeds (nmt.inspection.diagnostics).

A metric of the translations alone is a :class:`TextMetric`: one method gives its
pair for one sentence; registered with :func:`register`, it is measured on every run,
shown in report.md's diagnostics and by-length tables, results.csv, report.html, and
is in results.json (docs/extending.md, "A study metric").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from nmt.compare.rows import Column, Row, number, p_text
from nmt.inspection.diagnostics import repetition

# where a metric can be shown: the terminal's table, report.md's main table, its
# diagnostics table and by-length tables, results.csv, report.html's sortable table
Place = Literal["terminal", "report", "diagnostics", "by_length", "csv", "html"]
SENTENCE_PLACES: frozenset[Place] = frozenset({"diagnostics", "by_length", "csv", "html"})


@dataclass(frozen=True)
class Metric:
    """One figure of a study's row: ``key`` in the row's record (results.json,
    results.csv, report.html's data), ``header`` of its column, ``digits`` after the
    point (``thousands``: with separators), how it is ``measured`` (the module
    docstring), and the places it is ``shown_in``. ``spread``: report.md's cell is
    "mean ± std" over seeds (the std under ``KEY_std``); ``cell``: another way to show
    it there; ``csv``: its results.csv columns (default: ``key``)."""

    key: str
    header: str
    digits: int
    measured: Literal["score", "run", "attention", "sentence"]
    shown_in: frozenset[Place]
    thousands: bool = False
    spread: bool = False
    cell: Callable[[Row], str] | None = field(default=None, compare=False)
    csv: tuple[str, ...] = ()

    @property
    def format(self) -> str:
        return f"{{:{',' if self.thousands else ''}.{self.digits}f}}"

    def column(self) -> Column[Row]:
        """Its column in report.md's tables and on the terminal."""
        if self.cell is not None:
            return Column(self.header, self.cell)
        if self.spread:
            return Column(self.header, self._spread)
        return Column(self.header, lambda row: number(row.figure(self.key), self.format))

    def _spread(self, row: Row) -> str:
        mean, std = row.figure(self.key), row.figure(f"{self.key}_std")
        if mean is None:
            return "–"
        return f"{mean:.2f} ± {std:.2f}" if row.seeds > 1 else f"{mean:.2f}"


class TextMetric(Metric):
    """A diagnostic of the translations alone (``measured`` "sentence"): subclass it
    and give :meth:`pair`, the (numerator, denominator) of one sentence; a split's
    figure is the ratio of their sums."""

    def pair(self, hyp: str, ref: str, src: str) -> tuple[float, float]:
        raise NotImplementedError


class Repetition(TextMetric):
    """seq-rep-2 (Welleck et al. 2020): nmt.inspection.diagnostics.repetition."""

    def pair(self, hyp: str, ref: str, src: str) -> tuple[float, float]:
        return repetition(hyp)


METRICS: dict[str, Metric] = {}
# what a row's record holds besides the metrics' figures (nmt.compare.rows.Row.record)
RECORD_KEYS = {
    "variant", "split", "is_baseline", "length_buckets", "word_f", "word_counts",
    "ref_repetition", "caption_covered", "caption_recall", "differs_most", "p_values",
    "seed_deltas", "signs_agree", "significant", "verdict", "significant_holm",
}  # fmt: skip


def register(metric: Metric) -> Metric:
    """Add ``metric`` to the table, after those registered before it. Refused: a key
    taken already (by a metric, or by another entry of a row's record), and a
    :class:`TextMetric` not measured per sentence (its pairs are reduced as those
    are)."""
    if metric.key in METRICS:
        raise ValueError(f"study metric {metric.key!r} registered twice")
    if metric.key in RECORD_KEYS:
        raise ValueError(f"study metric {metric.key!r}: a row's record uses that key")
    if isinstance(metric, TextMetric) and metric.measured != "sentence":
        raise ValueError(f"study metric {metric.key!r}: a TextMetric is measured per sentence")
    METRICS[metric.key] = metric
    return metric


def shown_in(place: Place) -> list[Metric]:
    """The metrics shown in ``place``, in the table's order; report.md's diagnostics
    table lists those measured per sentence first, then the attention's."""
    shown = [m for m in METRICS.values() if place in m.shown_in]
    if place == "diagnostics":
        shown.sort(key=lambda m: m.measured != "sentence")
    return shown


def csv_keys() -> list[str]:
    """results.csv's columns: the variant and split, then each metric's."""
    keys = ["variant", "split"]
    for m in shown_in("csv"):
        keys += m.csv or [m.key]
    return keys


def per_sentence() -> list[str]:
    """The keys of the figures measured per sentence (each row's diagnostics)."""
    return [m.key for m in METRICS.values() if m.measured == "sentence"]


def text_metrics() -> list[TextMetric]:
    return [m for m in METRICS.values() if isinstance(m, TextMetric)]


def _p(row: Row) -> str:
    """The p-value; * where the difference is significant (p < alpha and every seed
    agrees in sign, nmt.compare.significance)."""
    if row.is_baseline:
        return "baseline"
    if row.p_value is None:  # the baseline has no finished run to test against
        return "–"
    return p_text(row.p_value) + (" *" if row.significant else "")


def _p_holm(row: Row) -> str:
    return "" if row.is_baseline else p_text(None if row.test is None else row.test.p_holm)


def _interval(row: Row) -> str:
    return f"{row.bleu_ci_low:.1f}–{row.bleu_ci_high:.1f}"


ALL: frozenset[Place] = frozenset({"terminal", "report", "csv", "html"})
MAIN: frozenset[Place] = frozenset({"report", "csv"})
for _metric in (
    Metric("seeds", "seeds", 0, "run", MAIN | {"html"}),
    Metric("bleu", "BLEU", 2, "score", ALL | {"by_length"}, spread=True),
    Metric("bleu_std", "± std", 2, "score", frozenset({"csv", "html"})),
    Metric("bleu_ci", "95% CI", 1, "score", MAIN | {"terminal"}, cell=_interval,
           csv=("bleu_ci_low", "bleu_ci_high")),
    Metric("p_value", "p", 3, "score", ALL, cell=_p,
           csv=("p_value", "signs_agree", "significant")),
    Metric("p_holm", "p, Holm", 3, "score", MAIN, cell=_p_holm,
           csv=("p_holm", "significant_holm")),
    Metric("chrf", "chrF", 2, "score", ALL, spread=True),
    Metric("chrf_std", "chrF ± std", 2, "score", frozenset({"csv"})),
    Metric("chrf++", "chrF++", 2, "score", MAIN | {"html"}, spread=True),
    Metric("chrf++_std", "chrF++ ± std", 2, "score", frozenset({"csv"})),
    Metric("ter", "TER", 2, "score", MAIN | {"html"}, spread=True),
    Metric("ter_std", "TER ± std", 2, "score", frozenset({"csv"})),
    Metric("params", "params", 0, "run", MAIN, thousands=True),
    Metric("train_steps", "train steps", 0, "run", frozenset({"csv"})),
    Metric("train_minutes", "train min", 1, "run", ALL),
    Metric("tokens_per_s", "tok/s", 0, "run", MAIN, thousands=True),
    Metric("sentences_per_s", "sent/s", 1, "run", MAIN | {"terminal"}),
    Metric("entropy", "entropy", 2, "attention", MAIN | {"terminal", "diagnostics"}),
    Metric("peak_distance", "peak dist", 2, "attention", MAIN),
    Metric("center_spread", "centre spread", 2, "attention", MAIN),
    Metric("center_distance", "centre dist", 2, "attention", MAIN | {"diagnostics", "html"}),
    Metric("aer", "AER", 3, "attention", MAIN | {"terminal"}),
    Metric("length_ratio", "length ratio", 3, "sentence", SENTENCE_PLACES),
    Repetition("repetition", "repetition", 3, "sentence", SENTENCE_PLACES),
    Metric("dropped", "dropped", 3, "sentence", SENTENCE_PLACES),
    Metric("backward", "backward", 2, "sentence", SENTENCE_PLACES),
):  # fmt: skip
    register(_metric)
