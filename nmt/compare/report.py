"""The comparison written down: a terminal table, report.md, results.csv, results.json."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from nmt.compare.metrics import Place, csv_keys, shown_in
from nmt.compare.rows import (
    Column,
    ContrastRow,
    Decision,
    EnsembleRow,
    Row,
    number,
    p_text,
    plain,
    table,
)
from nmt.compare.significance import NAMES
from nmt.io.files import write_text
from nmt.launch.runs import RunResult
from nmt.setup.compare import SignificanceSpec

VARIANT: Column[Any] = Column("variant", lambda r: r.variant, numeric=False)


def metric_columns(place: Place) -> list[Column[Row]]:
    """The variant, then the columns of the metrics shown in ``place``."""
    return [VARIANT] + [m.column() for m in shown_in(place)]


def _failed_cells(failure: RunResult, width: int) -> list[str]:
    return [f"{failure.variant} (seed {failure.seed})", f"failed: {failure.error}"] + [""] * (
        width - 2
    )


def print_tables(
    rows: list[Row],
    splits: tuple[str, ...],
    failures: list[RunResult],
    contrasts: list[ContrastRow] | None = None,
) -> None:
    """The main columns and every verdict, on stdout (report.md has every column); 120
    columns when piped."""
    out = Console(highlight=False)
    if not out.is_terminal:
        out.width = 120
    for split in splits:
        shown = Table(title=f"{split}: beam search, mean over seeds; all columns in report.md")
        terminal = metric_columns("terminal")
        for c in terminal:
            shown.add_column(c.header, justify="right" if c.numeric else "left")
        for row in rows:
            if row.split == split:
                shown.add_row(*(c.cell(row) for c in terminal))
        for f in failures:
            shown.add_row(*_failed_cells(f, len(terminal)), style="red")
        out.print(shown)
        for line in verdicts(rows, split) + verdicts(contrasts or [], split):
            out.print(f"  {line}")


def verdicts(rows: Sequence[Row | ContrastRow], split: str) -> list[str]:
    """Each difference from the baseline (or each contrast) in words."""
    return [r.test.verdict for r in rows if r.split == split and r.test is not None]


def markdown_table(rows: list[Row], split: str, failures: list[RunResult]) -> str:
    main = metric_columns("report")
    failed = [_failed_cells(f, len(main)) for f in failures]
    return table(main, [r for r in rows if r.split == split], failed)


def bucket_table(rows: list[Row], split: str, key: str = "bleu", fmt: str = "{:.2f}") -> str:
    """One figure per variant and source-length bucket."""
    mine = [r for r in rows if r.split == split]
    buckets = mine[0].length_buckets
    columns = [VARIANT] + [
        Column(f"{k} ({b['sentences']})", lambda r, k=k: number(r.length_buckets[k].get(key), fmt))
        for k, b in buckets.items()
    ]
    return table(columns, mine)


def diagnostics_table(rows: list[Row], split: str) -> str:
    """The diagnostics over the whole split, one row per variant."""
    return table(metric_columns("diagnostics"), [r for r in rows if r.split == split])


def caption_table(rows: list[Row], split: str) -> str:
    """A joined split's per-caption coverage / recall, one row per variant ("" for a
    split that joins nothing)."""
    mine = [r for r in rows if r.split == split and r.caption_recall is not None]
    if not mine:
        return ""

    def cell(row: Row, i: int) -> str:
        covered, recall = row.caption_covered or [], row.caption_recall or []
        return f"{number(covered[i], '{:.2f}')} / {recall[i]:.1f}"

    k = len(mine[0].caption_recall or [])
    columns = [VARIANT] + [Column(f"caption {i + 1}", lambda r, i=i: cell(r, i)) for i in range(k)]
    return table(columns, mine)


def word_table(rows: list[Row], split: str) -> str:
    """Word F-measure by the word's frequency in the training targets (compare-mt's
    buckets; reference words per bucket in brackets)."""
    mine = [r for r in rows if r.split == split and r.word_f is not None]
    if not mine:
        return ""
    counts = mine[0].word_counts or {}
    columns = [VARIANT] + [
        Column(f"{k} ({counts[k]})", lambda r, k=k: f"{(r.word_f or {})[k]:.3f}")
        for k in mine[0].word_f or {}
    ]
    return table(columns, mine)


def _clip(text: str, chars: int = 240) -> str:
    """A sentence as report.md shows it: at most ``chars`` characters, no backquote."""
    text = text.replace("`", "'")
    return text if len(text) <= chars else text[: chars - 1] + "…"


def examples(rows: list[Row], split: str, baseline: str) -> list[str]:
    """Where each variant differs most from the baseline, sentence by sentence."""
    out = []
    for r in rows:
        if r.split != split or not r.differs_most:
            continue
        out += [f"**{r.variant}** against {baseline} (first seeds, sentence BLEU):", ""]
        for e in r.differs_most:
            out.append(f"- line {e['line']} ({e['delta']:+.1f}): source `{_clip(e['src'])}`")
            out.append(f"  - reference: `{_clip(e['ref'])}`")
            out.append(f"  - {baseline}: `{_clip(e['baseline'])}`")
            out.append(f"  - {r.variant}: `{_clip(e['hyp'])}`")
        out.append("")
    return out


def contrast_table(contrasts: list[ContrastRow], split: str) -> str:
    """The spec's contrasts on one split: the mean difference over shared seeds, each
    seed's, p and its Holm adjustment over the split's contrasts, and the verdict."""
    mine = [c for c in contrasts if c.split == split]
    columns: list[Column[ContrastRow]] = [
        VARIANT,
        Column("against", lambda c: c.reference, numeric=False),
        Column("Δ", lambda c: _mean_delta(c.test.seed_deltas)),
        Column(
            "per seed",
            lambda c: ", ".join(f"{d:+.2f}" for d in c.test.seed_deltas) or "–",
            numeric=False,
        ),
        Column("p", lambda c: p_text(c.test.p_value)),
        Column(f"p, Holm ({len(mine)} tests)", lambda c: p_text(c.test.p_holm)),
        Column("significant, Holm", lambda c: _holm_word(c.test), numeric=False),
    ]
    return table(columns, mine)


def _holm_word(test: Decision) -> str:
    """Whether a contrast holds as one of its family (Holm): "yes"; "no"; "alone only"
    where it would be significant tested by itself."""
    if test.significant_holm if test.p_holm is not None else test.significant:
        return "yes"
    return "alone only" if test.significant else "no"


def _mean_delta(deltas: list[float]) -> str:
    return f"{sum(deltas) / len(deltas):+.2f}" if deltas else "–"


@dataclass(frozen=True)
class Report:
    """What report.md says: the study's rows, failures, contrasts and ensembles, how
    they were tested, its figures (split -> files, "_all": the study's own), and notes
    on reading them (timings from different machines)."""

    title: str
    splits: tuple[str, ...]
    rows: list[Row]
    failures: list[RunResult]
    baseline: str
    samples: int
    figures: dict[str, list[str]]
    significance: SignificanceSpec
    ensembles: list[EnsembleRow] = field(default_factory=list)
    contrasts: list[ContrastRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


TESTS = {
    "bootstrap": "two-sided paired bootstrap test of the seed-averaged BLEU (Koehn 2004)",
    "paired_bs": "sacreBLEU's paired bootstrap test on the pooled seeds",
    "paired_ar": "sacreBLEU's paired approximate randomisation test on the pooled seeds",
}


def write_markdown(path: Path, report: Report) -> None:
    """report.md: a table per split, the verdicts, the spec's contrasts, BLEU by source
    length, the ensembles of seeds (when asked for), the figures."""
    r, metric = report, report.significance.metrics[0]
    parts = [f"# {r.title}", ""]
    parts.append(
        f"BLEU and chrF are sacreBLEU corpus scores, mean ± standard deviation over seeds. "
        f"95% CI: percentile interval of the seed-averaged BLEU over {r.samples} bootstrap "
        f"resamples of the test sentences; p: {TESTS[r.significance.test]} of {metric} "
        f"against **{r.baseline}**; * marks a significant difference: p < "
        f"{r.significance.alpha} *and* every seed on the same side of the baseline's seed "
        "(a difference whose sign flips with the seed is within seed noise; with one seed "
        "there is no verdict); p, Holm: p adjusted for the split's tests against the "
        "baseline as one family (Holm 1979). Attention figures are read while "
        "the model reads the references: entropy (nats) of the cross-attention, distance "
        "of its peak from the diagonal, spread of the predicted centres around it and "
        "their distance from the aligned source position (the gold links where the "
        "split has them, else the diagonal; in source pieces), and AER of the argmax "
        "word alignments where gold alignments exist."
    )
    parts += [f"\n**Note:** {note}." for note in r.notes]
    for split in r.splits:
        parts += ["", f"## {split}", "", markdown_table(r.rows, split, r.failures), ""]
        parts += [f"- {line}" for line in verdicts(r.rows, split)] + [""]
        if any(c.split == split for c in r.contrasts):
            parts += [
                f"Contrasts ({NAMES[metric]}; the same test and rule as against the baseline):",
                "",
                contrast_table(r.contrasts, split),
                "",
            ]
            parts += [f"- {line}" for line in verdicts(r.contrasts, split)] + [""]
        if any(row.split == split for row in r.rows):
            parts += diagnostics_section(r.rows, split, r.baseline)
        if any(e.split == split for e in r.ensembles):
            parts += [
                "Each variant's seeds as one ensemble (beam search on the mean of their "
                "log-probabilities), beside the mean of the single seeds:",
                "",
            ]
            parts += [ensemble_table(r.ensembles, split), ""]
        parts += [f"![BLEU by source length on {split}]({f})" for f in r.figures.get(split, [])]
    if r.figures.get("_all"):
        parts += ["", "## Training and attention", ""]
        parts += [f"![{Path(f).stem}]({f})" for f in r.figures["_all"]]
    if r.rows:
        parts += ["", "Signatures:", ""]
        parts += [f"- {NAMES[m]}: `{s}`" for m, s in r.rows[0].signatures.items()]
    write_text(path, "\n".join(parts) + "\n")


def ensemble_table(rows: list[EnsembleRow], split: str) -> str:
    columns: list[Column[EnsembleRow]] = [
        VARIANT,
        Column("seeds", lambda e: str(e.seeds)),
        Column("ensemble BLEU", lambda e: f"{e.bleu:.2f}"),
        Column("seeds' mean BLEU", lambda e: f"{e.seeds_bleu:.2f}"),
        Column("gain", lambda e: f"{e.gain:+.2f}"),
        Column("ensemble chrF", lambda e: f"{e.chrf:.2f}"),
    ]
    return table(columns, [e for e in rows if e.split == split])


def diagnostics_section(rows: list[Row], split: str, baseline: str) -> list[str]:
    """Why the variants differ on one split: the diagnostics, by source length, word
    accuracy by frequency, and the sentences where each differs most."""
    ref = next((r.ref_repetition for r in rows if r.split == split), None)
    parts = [
        "Diagnostics (nmt/inspection/diagnostics.py), read on the variants' own translations: "
        "length ratio (hypothesis / reference words; below 1: stops early), repetition "
        f"(share of repeated word bigrams; the references: {number(ref, '{:.3f}')}), dropped "
        "(share of source words whose attention mass over the whole output is under 0.5: "
        "coverage, Tu et al. 2016), backward (source pieces the attention's peak moves "
        "back per target step); read while the model reads the references: entropy "
        "(nats) and, for local variants, centre dist (source pieces between the window's "
        "centre and the aligned source position: gold links, else the diagonal):",
        "",
        diagnostics_table(rows, split),
        "",
    ]
    if table := caption_table(rows, split):
        parts += [
            "Which captions each variant translated (a joined split: each sentence is K "
            "captions end to end): per caption k, the share of its source words that "
            "receive at least 0.5 of attention mass over the output (1 − dropped), and, "
            "after the slash, chrF recall of caption k's reference in the whole output "
            "(0-100), means over sentences and seeds:",
            "",
            table,
            "",
        ]
    for m in shown_in("by_length"):
        parts += [f"{m.header} by source length (words; sentences per bucket):", ""]
        parts += [bucket_table(rows, split, m.key, m.format), ""]
    if table := word_table(rows, split):
        parts += [
            "Word accuracy by frequency (F-measure of output words matched in the reference, "
            "by the word's count in the training targets, as compare-mt reports it; "
            "reference words per bucket):",
            "",
            table,
            "",
        ]
    return parts + examples(rows, split, baseline)


def write_csv(path: Path, rows: list[Row]) -> None:
    buf = io.StringIO()
    keys = csv_keys()
    writer = csv.DictWriter(buf, fieldnames=keys, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in map(Row.record, rows):
        writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in keys})
    write_text(path, buf.getvalue())


def write_json(path: Path, payload: dict[str, Any]) -> None:
    write_text(path, json.dumps(plain(payload), indent=2, allow_nan=False) + "\n")
