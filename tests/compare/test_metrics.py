"""The study's metric table (nmt.compare.metrics): each output reads its columns from
it, and a metric registered from a plug-in is measured and shown everywhere."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from nmt.compare import metrics
from nmt.compare.metrics import METRICS, Metric, csv_keys, register
from nmt.compare.study import run_study
from tests.compare.test_compare import write_spec

PLUGIN = Path(__file__).parents[1] / "plugins" / "copy_rate_metric.py"


def full_row():
    """A row with every optional figure set: each diagnostic, both further scores,
    word accuracy, a joined split's captions, the sentences that differ most."""
    from tests.compare.test_report import row

    return row(
        "local_m", "test*3", 41.0, length_ratio=0.9, repetition=0.1, dropped=0.2,
        backward=0.3, scores={"chrf++": (50.0, 1.0), "ter": (55.0, 0.0)},
        word_f={"1": 0.5}, word_counts={"1": 3}, caption_covered=[0.5], caption_recall=[9.0],
        differs_most=[],
    )  # fmt: skip


def test_every_csv_column_is_a_key_of_a_full_rows_record():
    """A metric whose key (or CSV column) the row's record does not use would be an
    empty column in results.csv and a dash in every table; the CSV's columns are
    each named once."""
    record = full_row().record()
    assert [k for k in csv_keys() if k not in record] == []
    assert len(csv_keys()) == len(set(csv_keys()))


def test_a_key_taken_or_a_text_metric_not_per_sentence_is_refused(monkeypatch):
    monkeypatch.setattr(metrics, "METRICS", dict(METRICS))
    with pytest.raises(ValueError, match="study metric 'bleu' registered twice"):
        register(Metric("bleu", "BLEU again", 2, "score", frozenset({"csv"})))
    with pytest.raises(ValueError, match="'variant': a row's record uses that key"):
        register(Metric("variant", "name", 0, "run", frozenset({"csv"})))
    with pytest.raises(ValueError, match="a TextMetric is measured per sentence"):
        register(metrics.Repetition("rep", "rep", 3, "score", frozenset({"csv"})))
    assert "rep" not in metrics.METRICS


@pytest.mark.slow  # trains a study: a second or more
def test_a_metric_from_a_plug_in_is_in_every_output(tmp_path, toy_dir, monkeypatch):
    """The copy rate of tests/plugins/copy_rate_metric.py, added to a finished study
    (its run is reused, not trained again) and registered when the spec's plug-in is
    imported: its figure per row and per length bucket in results.json (the ratio of
    its per-sentence sums, recomputed here from the translations), its column in
    results.csv and report.html, its column of report.md's diagnostics and its
    by-length table."""
    monkeypatch.setattr(metrics, "METRICS", dict(METRICS))  # the plug-in's stays here
    spec = write_spec(tmp_path, toy_dir, {"global": []}, seeds=(1,))
    run_study(spec, device="cpu")
    trained = (tmp_path / "study/runs/global/seed1/best.pt").stat().st_mtime_ns
    raw = yaml.safe_load(spec.read_text())
    raw["plugins"] = [str(PLUGIN)]
    spec.write_text(yaml.safe_dump(raw))
    out = run_study(spec, device="cpu")
    assert (out / "runs/global/seed1/best.pt").stat().st_mtime_ns == trained

    (row,) = json.loads((out / "results.json").read_text())["rows"]
    run = out / "runs/global/seed1"
    hyps = (run / "test.hyp").read_text().splitlines()
    srcs = (toy_dir / "test.src").read_text().splitlines()
    copied = sum(w in set(s.split()) for h, s in zip(hyps, srcs) for w in h.split())
    words = sum(len(h.split()) for h in hyps)
    assert row["copy_rate"] == pytest.approx(copied / words)
    assert all("copy_rate" in b for b in row["length_buckets"].values())
    with (out / "results.csv").open() as f:
        (record,) = csv.DictReader(f)
    assert float(record["copy_rate"]) == pytest.approx(copied / words)
    report = (out / "report.md").read_text()
    assert "| variant | length ratio | repetition | dropped | backward | copied |" in report
    assert "copied by source length (words; sentences per bucket):" in report
    assert '["copied", "copy_rate", 3]' in (out / "report.html").read_text()


def test_every_key_of_a_rows_record_is_a_metrics_or_reserved():
    """A row's record (results.json) holds the metrics' figures and RECORD_KEYS alone,
    so that a plug-in metric cannot take a key the record already uses."""
    full = full_row()
    keys = {k for k in full.record() if not k.endswith("_signature")}
    known = set(METRICS) | {k for m in METRICS.values() for k in m.csv} | metrics.RECORD_KEYS
    assert keys - known == set()
