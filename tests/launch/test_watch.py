"""The study's bar under ``--jobs``: progress read from the runs' own logs."""

from __future__ import annotations

import json

import pytest

from nmt.launch.watch import StudyClock, run_progress, study_progress


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


def test_the_study_clock_counts_each_runs_testing_after_its_last_update():
    """Three runs of 100 updates on two slots, each tested for 30 s after its last
    update: the time left counts the updates at the pace seen (1 s each), deals the
    queued run to the first slot free, and once a run has been timed through its
    testing, counts that for every run; the last run's testing is not "0:00:00"."""
    clock = StudyClock(slots=2)

    def poll(now, steps, running, ended=()):
        progress = [(s, 100) if s is not None else (0, None) for s in steps]
        clock.observe(now, progress, set(running), set(ended))
        return clock.left(now, progress, set(running), set(ended))

    assert poll(0, [0, 0, None], {0, 1}) == (None, False)  # no pace yet
    assert poll(10, [10, 10, None], {0, 1}) == (pytest.approx(90 + 100), False)
    assert poll(100, [100, 100, None], {0, 1}) == (pytest.approx(100), False)  # untimed tests
    # run 0 ends 30 s after its last update; run 2 takes its slot, run 1 still tests
    assert poll(130, [100, 100, 0], {1, 2}, ended={0}) == (pytest.approx(100 + 30), True)
    assert poll(131, [100, 100, 1], {2}, ended={0, 1}) == (pytest.approx(99 + 30.5), True)
    assert poll(231, [100, 100, 100], {2}, ended={0, 1}) == (pytest.approx(30.5), True)
    assert poll(251, [100, 100, 100], {2}, ended={0, 1}) == (pytest.approx(10.5), True)


def test_the_clock_reads_the_runs_logs_and_says_when_testing_is_not_timed(tmp_path):
    """poll reads each run's progress from its log; the ETA is unknown before a pace,
    then says that it leaves out the testing no run has been timed through yet."""
    run = log(tmp_path / "a", {"step": 10, "expected_steps": 100})
    clock = StudyClock(slots=1)
    assert clock.poll([run], {0}, set()) == ([(10, 100)], None)
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 20, "expected_steps": 100}\n')
    progress, left = clock.poll([run], {0}, set())
    assert progress == [(20, 100)] and left is not None and left.endswith(" + testing")
