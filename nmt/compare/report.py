"""The comparison written down: a terminal table, report.md, results.csv, results.json."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from nmt.compare.ensembles import markdown as ensemble_markdown
from nmt.compare.runs import RunResult
from nmt.compare.significance import NAMES, p_text
from nmt.compare.spec import SignificanceSpec
from nmt.io.files import write_text

COLUMNS = [  # (header, key, format); a None key is computed in _cells
    ("variant", "variant", "{}"),
    ("seeds", "seeds", "{}"),
    ("BLEU", None, ""),
    ("95% CI", None, ""),
    ("p", None, ""),
    ("p, Holm", None, ""),
    ("chrF", None, ""),
    ("params", "params", "{:,}"),
    ("train min", "train_minutes", "{:.1f}"),
    ("tok/s", "tokens_per_s", "{:,.0f}"),
    ("sent/s", "sentences_per_s", "{:.1f}"),
    ("entropy", "entropy", "{:.2f}"),
    ("peak dist", "peak_distance", "{:.2f}"),
    ("centre spread", "center_spread", "{:.2f}"),
    ("centre dist", "center_distance", "{:.2f}"),
    ("AER", "aer", "{:.3f}"),
]
CSV_KEYS = [
    "variant", "split", "seeds", "bleu", "bleu_std", "bleu_ci_low", "bleu_ci_high", "p_value",
    "signs_agree", "significant", "p_holm", "significant_holm", "chrf", "chrf_std", "params",
    "train_steps", "train_minutes", "tokens_per_s", "sentences_per_s", "entropy",
    "peak_distance", "center_spread", "center_distance", "aer", "length_ratio", "repetition",
    "dropped", "backward",
]  # fmt: skip
# (key, name, format) of the diagnostics (nmt.compare.diagnostics), whole split and by length
DIAGNOSTIC_COLUMNS = [
    ("length_ratio", "length ratio", "{:.3f}"),
    ("repetition", "repetition", "{:.3f}"),
    ("dropped", "dropped", "{:.3f}"),
    ("backward", "backward", "{:.2f}"),
    ("entropy", "entropy", "{:.2f}"),
    ("center_distance", "centre dist", "{:.2f}"),
]
BY_LENGTH = [("bleu", "BLEU", "{:.2f}"), *DIAGNOSTIC_COLUMNS[:4]]


def format_p(row: dict[str, Any]) -> str:
    """The p-value; * where the difference is significant (p < alpha and every seed
    agrees in sign, nmt.compare.significance)."""
    if row["is_baseline"]:
        return "baseline"
    p = row.get("p_value")
    if p is None:  # the baseline has no finished run to test against
        return "–"
    star = " *" if row.get("significant") else ""
    return p_text(p) + star


TERMINAL = ("variant", "BLEU", "95% CI", "p", "chrF", "train min", "sent/s", "entropy", "AER")


def _spread(mean: float, std: float, seeds: int) -> str:
    return f"{mean:.2f} ± {std:.2f}" if seeds > 1 else f"{mean:.2f}"


def _cells(row: dict[str, Any], only: tuple[str, ...] | None = None) -> list[str]:
    computed = {
        "BLEU": _spread(row["bleu"], row["bleu_std"], row["seeds"]),
        "95% CI": f"{row['bleu_ci_low']:.1f}–{row['bleu_ci_high']:.1f}",
        "p": format_p(row),
        "p, Holm": "" if row["is_baseline"] else p_text(row.get("p_holm")),
        "chrF": _spread(row["chrf"], row["chrf_std"], row["seeds"]),
    }
    out = []
    for header, key, fmt in COLUMNS:
        if only is not None and header not in only:
            continue
        if key is None:
            out.append(computed[header])
        else:
            value = row.get(key)
            out.append("–" if value is None else fmt.format(value))
    return out


def _failed_cells(failure: RunResult, width: int) -> list[str]:
    return [f"{failure.variant} (seed {failure.seed})", f"failed: {failure.error}"] + [""] * (
        width - 2
    )


def print_tables(
    rows: list[dict[str, Any]],
    splits: tuple[str, ...],
    failures: list[RunResult],
    contrasts: list[dict[str, Any]] | None = None,
) -> None:
    """The main columns and every verdict, on stdout (report.md has every column); 120
    columns when piped."""
    out = Console(highlight=False)
    if not out.is_terminal:
        out.width = 120
    for split in splits:
        table = Table(title=f"{split}: beam search, mean over seeds; all columns in report.md")
        for header in TERMINAL:
            table.add_column(header, justify="left" if header == "variant" else "right")
        for row in rows:
            if row["split"] == split:
                table.add_row(*_cells(row, TERMINAL))
        for f in failures:
            table.add_row(*_failed_cells(f, len(TERMINAL)), style="red")
        out.print(table)
        for line in verdicts(rows, split) + verdicts(contrasts or [], split):
            out.print(f"  {line}")


def verdicts(rows: list[dict[str, Any]], split: str) -> list[str]:
    """Each difference from the baseline (or each contrast) in words."""
    return [r["verdict"] for r in rows if r["split"] == split and "verdict" in r]


def markdown_table(rows: list[dict[str, Any]], split: str, failures: list[RunResult]) -> str:
    lines = ["| " + " | ".join(h for h, _k, _f in COLUMNS) + " |"]
    lines.append("|" + "|".join("---" if h == "variant" else "---:" for h, _k, _f in COLUMNS) + "|")
    for row in rows:
        if row["split"] == split:
            lines.append("| " + " | ".join(_cells(row)) + " |")
    for f in failures:
        lines.append("| " + " | ".join(_failed_cells(f, len(COLUMNS))) + " |")
    return "\n".join(lines)


def _number(value: Any, fmt: str) -> str:
    return (
        "–"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else fmt.format(value)
    )


def bucket_table(
    rows: list[dict[str, Any]], split: str, key: str = "bleu", fmt: str = "{:.2f}"
) -> str:
    """One figure per variant and source-length bucket."""
    mine = [r for r in rows if r["split"] == split]
    labels = list(mine[0]["length_buckets"])
    counts = [mine[0]["length_buckets"][k]["sentences"] for k in labels]
    lines = ["| variant | " + " | ".join(f"{k} ({n})" for k, n in zip(labels, counts)) + " |"]
    lines.append("|---|" + "---:|" * len(labels))
    for r in mine:
        cells = [_number(r["length_buckets"][k].get(key), fmt) for k in labels]
        lines.append(f"| {r['variant']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def diagnostics_table(rows: list[dict[str, Any]], split: str) -> str:
    """The diagnostics over the whole split, one row per variant."""
    lines = ["| variant | " + " | ".join(name for _k, name, _f in DIAGNOSTIC_COLUMNS) + " |"]
    lines.append("|---|" + "---:|" * len(DIAGNOSTIC_COLUMNS))
    for r in rows:
        if r["split"] == split:
            cells = [_number(r.get(k), f) for k, _n, f in DIAGNOSTIC_COLUMNS]
            lines.append(f"| {r['variant']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def caption_table(rows: list[dict[str, Any]], split: str) -> str:
    """A joined split's per-caption coverage / recall, one row per variant ("" for a
    split that joins nothing)."""
    mine = [r for r in rows if r["split"] == split and "caption_recall" in r]
    if not mine:
        return ""
    k = len(mine[0]["caption_recall"])
    lines = ["| variant | " + " | ".join(f"caption {i + 1}" for i in range(k)) + " |"]
    lines.append("|---|" + "---:|" * k)
    for r in mine:
        cells = [
            f"{_number(c, '{:.2f}')} / {rec:.1f}"
            for c, rec in zip(r["caption_covered"], r["caption_recall"])
        ]
        lines.append(f"| {r['variant']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def word_table(rows: list[dict[str, Any]], split: str) -> str:
    """Word F-measure by the word's frequency in the training targets (compare-mt's
    buckets; reference words per bucket in brackets)."""
    mine = [r for r in rows if r["split"] == split and "word_f" in r]
    if not mine:
        return ""
    labels, counts = list(mine[0]["word_f"]), mine[0]["word_counts"]
    lines = ["| variant | " + " | ".join(f"{k} ({counts[k]})" for k in labels) + " |"]
    lines.append("|---|" + "---:|" * len(labels))
    for r in mine:
        lines.append(
            f"| {r['variant']} | " + " | ".join(f"{r['word_f'][k]:.3f}" for k in labels) + " |"
        )
    return "\n".join(lines)


def _clip(text: str, chars: int = 240) -> str:
    """A sentence as report.md shows it: at most ``chars`` characters, no backquote."""
    text = text.replace("`", "'")
    return text if len(text) <= chars else text[: chars - 1] + "…"


def examples(rows: list[dict[str, Any]], split: str, baseline: str) -> list[str]:
    """Where each variant differs most from the baseline, sentence by sentence."""
    out = []
    for r in rows:
        if r["split"] != split or not r.get("differs_most"):
            continue
        out += [f"**{r['variant']}** against {baseline} (first seeds, sentence BLEU):", ""]
        for e in r["differs_most"]:
            out.append(f"- line {e['line']} ({e['delta']:+.1f}): source `{_clip(e['src'])}`")
            out.append(f"  - reference: `{_clip(e['ref'])}`")
            out.append(f"  - {baseline}: `{_clip(e['baseline'])}`")
            out.append(f"  - {r['variant']}: `{_clip(e['hyp'])}`")
        out.append("")
    return out


def contrast_table(contrasts: list[dict[str, Any]], split: str) -> str:
    """The spec's contrasts on one split: the mean difference over shared seeds, each
    seed's, p and its Holm adjustment over the split's contrasts, and the verdict."""
    mine = [c for c in contrasts if c["split"] == split]
    lines = [
        f"| variant | against | Δ | per seed | p | p, Holm ({len(mine)} tests) | significant |",
        "|---|---|---:|---|---:|---:|---|",
    ]
    for c in mine:
        deltas = c["seed_deltas"]
        cells = [
            c["variant"],
            c["reference"],
            f"{sum(deltas) / len(deltas):+.2f}" if deltas else "–",
            ", ".join(f"{d:+.2f}" for d in deltas) or "–",
            p_text(c.get("p_value")),
            p_text(c.get("p_holm")),
            "yes" if c["significant"] else "no",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_markdown(
    path: Path,
    title: str,
    splits: tuple[str, ...],
    rows: list[dict[str, Any]],
    failures: list[RunResult],
    baseline: str,
    samples: int,
    figures: dict[str, list[str]],
    significance: SignificanceSpec,
    ensembles: list[dict[str, Any]] | None = None,
    contrasts: list[dict[str, Any]] | None = None,
    notes: list[str] | None = None,
) -> None:
    """report.md: a table per split, the verdicts, the spec's contrasts, BLEU by source
    length, the ensembles of seeds (when asked for), the figures; ``notes`` say what
    to keep in mind reading them (timings from different machines)."""
    parts = [f"# {title}", ""]
    tests = {
        "bootstrap": "two-sided paired bootstrap test of the seed-averaged BLEU (Koehn 2004)",
        "paired_bs": "sacreBLEU's paired bootstrap test on the pooled seeds",
        "paired_ar": "sacreBLEU's paired approximate randomisation test on the pooled seeds",
    }
    metric = significance.metrics[0]
    parts.append(
        f"BLEU and chrF are sacreBLEU corpus scores, mean ± standard deviation over seeds. "
        f"95% CI: percentile interval of the seed-averaged BLEU over {samples} bootstrap "
        f"resamples of the test sentences; p: {tests[significance.test]} of {metric} "
        f"against **{baseline}**; * marks a significant difference: p < "
        f"{significance.alpha} *and* every seed on the same side of the baseline's seed "
        "(a difference whose sign flips with the seed is within seed noise; with one seed "
        "there is no verdict); p, Holm: p adjusted for the split's tests against the "
        "baseline as one family (Holm 1979). Attention figures are read while "
        "the model reads the references: entropy (nats) of the cross-attention, distance "
        "of its peak from the diagonal, spread of the predicted centres around it and "
        "their distance from the aligned source position (the gold links where the "
        "split has them, else the diagonal; in source pieces), and AER of the argmax "
        "word alignments where gold alignments exist."
    )
    parts += [f"\n**Note:** {note}." for note in notes or []]
    for split in splits:
        parts += ["", f"## {split}", "", markdown_table(rows, split, failures), ""]
        parts += [f"- {line}" for line in verdicts(rows, split)] + [""]
        if any(c["split"] == split for c in contrasts or []):
            parts += [
                f"Contrasts ({NAMES[metric]}; the same test and rule as against the baseline):",
                "",
                contrast_table(contrasts, split),
                "",
            ]
            parts += [f"- {line}" for line in verdicts(contrasts, split)] + [""]
        if any(r["split"] == split for r in rows):
            parts += diagnostics_section(rows, split, baseline)
        if any(r["split"] == split for r in ensembles or []):
            parts += [
                "Each variant's seeds as one ensemble (beam search on the mean of their "
                "log-probabilities), beside the mean of the single seeds:",
                "",
            ]
            parts += [ensemble_markdown(ensembles, split), ""]
        parts += [f"![BLEU by source length on {split}]({f})" for f in figures.get(split, [])]
    if figures.get("_all"):
        parts += ["", "## Training and attention", ""]
        parts += [f"![{Path(f).stem}]({f})" for f in figures["_all"]]
    if rows:
        parts += ["", "Signatures:", "", f"- BLEU: `{rows[0]['bleu_signature']}`"]
        parts += [f"- chrF: `{rows[0]['chrf_signature']}`"]
    write_text(path, "\n".join(parts) + "\n")


def diagnostics_section(rows: list[dict[str, Any]], split: str, baseline: str) -> list[str]:
    """Why the variants differ on one split: the diagnostics, by source length, word
    accuracy by frequency, and the sentences where each differs most."""
    ref = next((r.get("ref_repetition") for r in rows if r["split"] == split), None)
    parts = [
        "Diagnostics (nmt/compare/diagnostics.py), read on the variants' own translations: "
        "length ratio (hypothesis / reference words; below 1: stops early), repetition "
        f"(share of repeated word bigrams; the references: {_number(ref, '{:.3f}')}), dropped "
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
    for key, name, fmt in BY_LENGTH:
        parts += [f"{name} by source length (words; sentences per bucket):", ""]
        parts += [bucket_table(rows, split, key, fmt), ""]
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


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_KEYS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in CSV_KEYS})
    write_text(path, buf.getvalue())


def plain(value: Any) -> Any:
    """JSON-safe: NaN -> None, paths -> strings, tuples -> lists."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(path: Path, payload: dict[str, Any]) -> None:
    write_text(path, json.dumps(plain(payload), indent=2, allow_nan=False) + "\n")
