"""Progress of runs that train in other processes (``nmt compare --jobs N``), read
from their logs: the study's bar counts updates over every run, with a rate and an
ETA, where otherwise nothing would show until a run finished."""

from __future__ import annotations

import json
from pathlib import Path

from nmt.errors import NmtError
from nmt.io.files import read_json
from nmt.training.run import SUMMARY

TAIL_BYTES = 8192  # the last log lines, enough to hold a training record


def run_progress(run_dir: Path) -> tuple[int, int | None]:
    """(updates done, updates it will stop at) of one run: from summary.json once it
    has finished, else from the last training line of metrics.jsonl (the trainer's
    ``expected_steps``; None before the first line or without a step budget)."""
    try:
        summary = read_json(run_dir / SUMMARY)
    except NmtError:  # damaged: the run resumes to rebuild it
        summary = None
    if isinstance(summary, dict) and "steps" in summary:
        return summary["steps"], summary["steps"]
    try:
        with open(run_dir / "metrics.jsonl", "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - TAIL_BYTES))
            lines = f.read().splitlines()
    except OSError:
        return 0, None
    for line in reversed(lines):
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue  # the first, cut by the seek, or a line being written
        if "expected_steps" in record:
            return record["step"], record["expected_steps"]
    return 0, None


def study_progress(run_dirs: list[Path]) -> tuple[int, int | None]:
    """Updates done over every run, and the total they will reach; a run that has not
    logged yet is counted at the mean of those that have (runs of one study mostly
    share a budget), and the total is None until one has."""
    done, known, unknown = 0, [], 0
    for run_dir in run_dirs:
        step, expected = run_progress(run_dir)
        done += step
        if expected is None:
            unknown += 1
        else:
            known.append(max(expected, step))
    if not known:
        return done, None
    return done, sum(known) + round(unknown * sum(known) / len(known))
