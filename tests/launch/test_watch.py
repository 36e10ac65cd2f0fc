"""The study's bar under ``--jobs``: progress read from the runs' own logs."""

from __future__ import annotations

import json

from nmt.launch.watch import run_progress, study_progress


def log(run_dir, *records, summary=None):
    run_dir.mkdir(parents=True)
    lines = [json.dumps(r) for r in records]
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    if summary is not None:
        (run_dir / "summary.json").write_text(json.dumps({"steps": summary}))
    return run_dir


def test_a_run_reports_its_last_training_line_or_its_summary(tmp_path):
    training = {"step": 40, "loss": 2.0, "expected_steps": 100}
    valid = {"step": 40, "valid_loss": 1.9}  # validation lines carry no budget
    running = log(tmp_path / "a", {"step": 20, "expected_steps": 100}, training, valid)
    assert run_progress(running) == (40, 100)
    with open(running / "metrics.jsonl", "a") as f:
        f.write('{"step": 60, "expe')  # a line being written when read
    assert run_progress(running) == (40, 100)
    stopped_early = log(tmp_path / "b", training, summary=55)
    assert run_progress(stopped_early) == (55, 55)
    assert run_progress(tmp_path / "not started") == (0, None)


def test_the_study_counts_unstarted_runs_at_the_mean_budget(tmp_path):
    a = log(tmp_path / "a", {"step": 30, "expected_steps": 100})
    b = log(tmp_path / "b", {"step": 10, "expected_steps": 200})
    queued = tmp_path / "c"
    assert study_progress([a, b, queued]) == (40, 100 + 200 + 150)
    assert study_progress([queued]) == (0, None)
