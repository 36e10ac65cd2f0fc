"""report.md, results.csv and results.json from rows whose figures are known."""

from __future__ import annotations

import csv
import json
import math
from itertools import pairwise

import pytest

from nmt.compare.metrics import shown_in
from nmt.compare.report import (
    Report,
    contrast_table,
    print_tables,
    write_csv,
    write_json,
    write_markdown,
)
from nmt.compare.rows import ContrastRow, Decision, Row
from nmt.launch.runs import RunResult
from nmt.setup.compare import SignificanceSpec


def row(variant: str, split: str, bleu: float, **extra) -> Row:
    """A row whose figures are known; ``extra`` sets fields, attention figures
    (center_spread, ...) and diagnostics (length_ratio, ...) by name."""
    baseline = variant == "global"
    test = None if baseline else Decision(
        0.0004, {"bleu": 0.0004}, [1.0, 1.0, 1.0], True, True, f"{variant} on {split}: in words",
        p_holm=0.0123, significant_holm=True,
    )  # fmt: skip
    attention = {"entropy": 1.009, "peak_distance": 1.837, "center_spread": None,
                 "center_distance": None, "aer": None}  # fmt: skip
    diagnostics = {}
    for key in list(extra):
        if key in attention:
            attention[key] = extra.pop(key)
        elif key in ("length_ratio", "repetition", "dropped", "backward"):
            diagnostics[key] = extra.pop(key)
    fields = {
        "variant": variant, "split": split, "seeds": 3, "is_baseline": baseline,
        "bleu": bleu, "bleu_std": 0.5, "bleu_ci_low": bleu - 1.0, "bleu_ci_high": bleu + 1.0,
        "chrf": 60.0, "chrf_std": 0.25, "params": 7_578_624, "train_steps": 100.0,
        "train_minutes": 5.9, "tokens_per_s": 49_498.3, "sentences_per_s": 392.87,
        "attention": attention, "diagnostics": diagnostics,
        "length_buckets": {
            "1-10": {"sentences": 7, "bleu": bleu + 2}, "11+": {"sentences": 0, "bleu": math.nan}
        },
        "ref_repetition": 0.0, "signatures": {"bleu": "nrefs:1|bleu", "chrf": "nrefs:1|chrf"},
        "test": test,
    }  # fmt: skip
    return Row(**(fields | extra))


ROWS = [
    row("global", "test", 40.0),
    row("local_m", "test", 41.25, center_spread=2.5),
    row("one_seed", "test", 20.0, seeds=1, scores={"ter": (55.0, 0.0)}),
    row("global", "test_long", 30.0),
    row("local_m", "test_long", 35.5),
]
CONTRAST = ContrastRow(
    "test_long", "local_m", "ss",
    Decision(0.25, {}, [0.5, -0.1, 0.2], False, False, "local_m against ss: words", p_holm=0.5),
)  # fmt: skip


def sections(text: str) -> dict[str, str]:
    """report.md split at its "## split" headings."""
    parts = text.split("\n## ")
    return {p.split("\n", 1)[0]: p for p in parts[1:]}


def test_each_split_reports_its_own_rows_verdicts_buckets_and_contrasts(tmp_path):
    failure = RunResult("hard", 2, tmp_path / "r", "failed", "out of memory")
    report = Report(
        "study", ("test", "test_long"), ROWS, [failure], "global", 1000,
        {"test": ["b.png"], "_all": ["dev_curves.png"]}, SignificanceSpec(), contrasts=[CONTRAST],
    )  # fmt: skip
    write_markdown(tmp_path / "report.md", report)
    text = (tmp_path / "report.md").read_text()
    assert "against **global**" in text and "1000 bootstrap" in text
    test, long = (sections(text)[s] for s in ("test", "test_long"))
    assert "| local_m | 3 | 41.25 ± 0.50 | 40.2–42.2 | <0.001 * | 0.012 | 60.00 ± 0.25 |" in test
    assert "| 7,578,624 | 5.9 | 49,498 | 392.9 | 1.01 | 1.84 | 2.50 | – |" in test
    assert "| global | 3 | 40.00 ± 0.50 | 39.0–41.0 | baseline |  |" in test
    assert "| one_seed | 1 | 20.00 | 19.0–21.0 | <0.001 * | 0.012 | 60.00 | – | 55.00 |" in test
    assert (
        "| local_m | 3 | 41.25 ± 0.50 | 40.2–42.2 | <0.001 * | 0.012 | 60.00 ± 0.25 | – | – |"
        in test
    )
    assert "41.25" not in long and "35.50 ± 0.50" in long
    assert "- local_m on test: in words" in test and "on test:" not in long
    assert "| local_m | 43.25 | – |" in test and "| 1-10 (7) | 11+ (0) |" in test
    assert "| local_m | ss | +0.20 | +0.50, -0.10, +0.20 | 0.250 | 0.500 | no |" in long
    assert "- local_m against ss: words" in long and "Contrasts" not in test
    assert "![BLEU by source length on test](b.png)" in test and "b.png" not in long
    assert "| hard (seed 2) | failed: out of memory |" in test and "hard (seed 2)" in long
    assert (
        text.rstrip().endswith("- chrF: `nrefs:1|chrf`") and "![dev_curves](dev_curves.png)" in text
    )
    starts = ("| variant | seeds", "| global | 3", "| local_m | 3", "| hard (seed 2)")
    main = [x for x in test.splitlines() if x.startswith(starts)]
    assert len(main) == 4 and {x.count("|") for x in main} == {len(shown_in("report")) + 2}


def test_csv_and_json_hold_every_row_with_nan_as_empty(tmp_path):
    write_csv(tmp_path / "results.csv", ROWS)
    with (tmp_path / "results.csv").open() as f:
        got = list(csv.DictReader(f))
    assert [(r["variant"], r["split"]) for r in got] == [(r.variant, r.split) for r in ROWS]
    assert got[0]["p_value"] == "" and float(got[1]["bleu"]) == 41.25
    write_json(tmp_path / "results.json", {"rows": [r.record() for r in ROWS]})
    back = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert back[0]["length_buckets"]["11+"]["bleu"] is None and back[1]["center_spread"] == 2.5


def test_the_terminal_shows_each_splits_rows_and_verdicts(capsys):
    print_tables(ROWS, ("test_long",), [], contrasts=[CONTRAST])
    out = capsys.readouterr().out
    assert "35.50 ± 0.50" in out and "41.25" not in out and "one_seed" not in out
    assert "local_m on test_long: in words" in out and "local_m against ss: words" in out
    assert "on test:" not in out


def test_the_diagnostics_section_shows_each_figure_by_split_length_and_frequency(tmp_path):
    figures = {"length_ratio": 0.71234, "repetition": 0.0456, "dropped": 0.25, "backward": 1.5}
    buckets = {
        "1-10": {"sentences": 7, "bleu": 30.0, "length_ratio": 0.95, "dropped": 0.1},
        "11+": {"sentences": 3, "bleu": 12.0, "length_ratio": 0.48, "dropped": 0.6},
    }
    example = {"line": 4, "delta": -23.4, "src": "a b", "ref": "A B", "baseline": "A B", "hyp": "A"}
    words = {"word_f": {"<1": 0.0, ">=1": 0.8125}, "word_counts": {"<1": 2, ">=1": 40}}
    rows = [
        row("global", "test*3", 30.0, ref_repetition=0.0123, **words),
        row("local_m", "test*3", 25.0, **figures, **words, differs_most=[example]),
    ]
    rows[1].length_buckets = buckets
    report = Report("study", ("test*3",), rows, [], "global", 1000, {}, SignificanceSpec())
    write_markdown(tmp_path / "report.md", report)
    text = (tmp_path / "report.md").read_text()
    assert "the references: 0.012" in text
    assert "| local_m | 0.712 | 0.046 | 0.250 | 1.50 | 1.01 |" in text
    assert "| global | – | – | – | – | 1.01 |" in text  # not measured: a dash, not a zero
    for name in ("BLEU", "length ratio", "repetition", "dropped", "backward"):
        assert f"{name} by source length (words; sentences per bucket):" in text
    assert "| local_m | 0.950 | 0.480 |" in text and "| local_m | 0.100 | 0.600 |" in text
    assert "| variant | <1 (2) | >=1 (40) |" in text and "| local_m | 0.000 | 0.812 |" in text
    assert "- line 4 (-23.4): source `a b`" in text and "  - local_m: `A`" in text


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_the_figures_draw_bands_greyed_buckets_and_one_colour_scale(tmp_path):
    """BLEU by length with the seeds' range and small buckets greyed; attention panels
    on one scale with the captions' starts; rows from before the bands draw too."""
    import numpy as np

    from nmt.compare.plots import plot_attention_grid, plot_length_buckets
    from nmt.inspection.maps import AttentionMap

    buckets = {
        "1-10": {"sentences": 5, "bleu": 30.0, "bleu_min": 28.0, "bleu_max": 31.0},
        "11+": {"sentences": 90, "bleu": 20.0, "length_ratio": 0.8},
    }
    ones = {k: {"sentences": v["sentences"], "bleu": 1.0} for k, v in buckets.items()}
    rows = [
        row("a", "test", 30.0, seeds=3, length_buckets=buckets),
        row("b", "test", 1.0, seeds=1, length_buckets=ones),
    ]
    plot_length_buckets(tmp_path / "len.png", "test", rows)
    rng = np.random.default_rng(0)
    maps = {
        v: AttentionMap(["▁a", "▁b", "▁c", "</s>"], ["▁x", "</s>"], rng.random((2, 2, 2, 4)), None)
        for v in ("global", "local_m")
    }
    plot_attention_grid(tmp_path / "att.png", maps, "test*2 line 0", {"global": [2]})
    for name in ("len.png", "att.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_the_length_buckets_labels_do_not_overlap():
    """Eight buckets with four-digit sentence counts (a study's train>16 split): each
    panel's tick labels, drawn, leave a gap between neighbours (they overlapped)."""
    from nmt.compare.plots import length_figure
    from nmt.inspection.plotting import pyplot

    names = ["1-10", "11-15", "16-20", "21-25", "26-30", "31-40", "41-60", "61+"]
    buckets = {k: {"sentences": 1968, "bleu": 20.0, "length_ratio": 0.8} for k in names}
    rows = [row(v, "train>16", 20.0, seeds=1, length_buckets=buckets) for v in ("a", "b")]
    fig = length_figure("train>16", rows)
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    for ax in fig.axes:
        boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels()]
        assert len(boxes) == len(names)
        gaps = [b.x0 - a.x1 for a, b in pairwise(boxes)]
        assert min(gaps) > 0, gaps
    pyplot().close(fig)


def test_every_variant_of_a_large_study_has_a_line_of_its_own(tmp_path):
    """Colours repeat after ten: the next variants change line and marker, so that no
    two of 40 look alike; 18 variants draw with the legend beside the panels."""
    from nmt.compare.plots import plot_length_buckets, style

    assert len({tuple(sorted(style(i).items())) for i in range(40)}) == 40
    buckets = {"1-10": {"sentences": 50, "bleu": 30.0, "length_ratio": 0.9}}
    rows = [row(f"v{i}", "test", 30.0, seeds=1, length_buckets=buckets) for i in range(18)]
    plot_length_buckets(tmp_path / "len.png", "test", rows)
    assert (tmp_path / "len.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "p, p_holm, alone, holm, word",
    [
        (0.028, 0.056, True, False, "alone only"),  # the audit's local_m+xalibi at K = 2
        (0.002, 0.018, True, True, "yes"),
        (0.20, 0.40, False, False, "no"),
        (0.01, None, True, None, "yes"),  # a family not adjusted: the test alone
    ],
)
def test_the_contrast_tables_significant_column_applies_holm(p, p_holm, alone, holm, word):
    test = Decision(p, {}, [0.3, 1.2, 0.1], True, alone, "words", p_holm, holm)
    text = contrast_table([ContrastRow("test", "a", "b", test)], "test")
    header, _, cells = text.splitlines()[:3]
    assert "significant, Holm" in header
    assert cells.rstrip(" |").rsplit("|", 1)[1].strip() == word
