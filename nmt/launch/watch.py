"""Progress of runs that train in other processes (``nmt compare --jobs N``), read
from their logs: the study's bar counts updates over every run, with a rate and an
ETA, where otherwise nothing would show until a run finished. The ETA also counts
what a run does after its last update (testing every split, decoding it again),
which its updates do not show (:class:`StudyClock`)."""

from __future__ import annotations

import heapq
import json
import time
from pathlib import Path

from nmt.errors import NmtError
from nmt.io.files import read_json
from nmt.progress import clock
from nmt.training.run import SUMMARY

TAIL_BYTES = 8192  # the last log lines, enough to hold a training record
SUMMARY_SECONDS = 60.0  # how often a study in a log (no terminal) says where it stands


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
    """Updates done over every run, and the total they will reach (:func:`summed`)."""
    return summed([run_progress(run_dir) for run_dir in run_dirs])


def summed(progress: list[tuple[int, int | None]]) -> tuple[int, int | None]:
    """Updates done over runs of :func:`run_progress`, and the total they will reach; a
    run that has not logged yet is counted at the mean of those that have (runs of one
    study mostly share a budget), and the total is None until one has."""
    done, known, unknown = 0, [], 0
    for step, expected in progress:
        done += step
        if expected is None:
            unknown += 1
        else:
            known.append(max(expected, step))
    if not known:
        return done, None
    return done, sum(known) + round(unknown * sum(known) / len(known))


class StudyClock:
    """The time a study has left, where its runs train in ``slots`` processes at once:
    what each run has left (its updates at the pace one run has trained in this
    study, then its tail: testing and decoding, at the mean of the tails timed here)
    dealt in plan order to whichever slot frees first. An ETA that counted updates
    alone said 0:00:00 while the last runs were still testing (minutes, on long
    joined splits), and started low before any run had tested.

    :meth:`observe` takes each poll: every run's (updates done, updates it stops at)
    in plan order, which are running (taken up by a worker, or a SLURM job that
    runs) and which have ended. ``slots`` may change between polls (the jobs a
    cluster runs at once)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.tested_since: dict[int, float] = {}  # run -> when it was first seen past training
        self.tails: list[float] = []  # seconds from a run's last update to its end
        self.last: dict[int, tuple[int, float]] = {}  # run -> (updates, time) at its last poll
        self.updates, self.seconds = 0, 0.0  # observed training of one run: updates, seconds

    def observe(
        self, now: float, progress: list[tuple[int, int | None]], running: set[int], ended: set[int]
    ) -> None:
        for run, (step, expected) in enumerate(progress):
            if run in ended:
                if run in self.tested_since:
                    self.tails.append(now - self.tested_since.pop(run))
                self.last.pop(run, None)
            elif run in running and expected is not None and step >= expected:
                self.tested_since.setdefault(run, now)
                self.last.pop(run, None)
            elif run in running:
                if run in self.last:
                    updates, then = self.last[run]
                    self.updates += step - updates
                    self.seconds += now - then
                self.last[run] = (step, now)

    def left(
        self, now: float, progress: list[tuple[int, int | None]], running: set[int], ended: set[int]
    ) -> tuple[float | None, bool]:
        """Seconds left (None before one run's pace is known), and whether they count the
        tails (False until a run has been timed from its last update to its end)."""
        if self.updates <= 0:
            return None, False
        pace = self.seconds / self.updates  # seconds per update of one run
        tail = sum(self.tails) / len(self.tails) if self.tails else 0.0
        known = [e for _, e in progress if e is not None]
        budget = sum(known) / len(known) if known else 0
        slots = [0.0] * max(self.slots - len(running - ended), 0)
        queued = []
        for run, (step, expected) in enumerate(progress):
            if run in ended:
                continue
            if run in self.tested_since:
                seconds = max(tail - (now - self.tested_since[run]), 0.0)
            else:
                seconds = max((expected or budget) - step, 0) * pace + tail
            (slots if run in running else queued).append(seconds)
        heapq.heapify(slots)
        for seconds in queued:  # plan order: the next run goes to the first slot free
            heapq.heappush(slots, heapq.heappop(slots) + seconds)
        return max(slots, default=0.0), bool(self.tails)

    def poll(
        self, run_dirs: list[Path], running: set[int], ended: set[int]
    ) -> tuple[list[tuple[int, int | None]], str | None]:
        """Read every run's progress (:func:`run_progress`) and :meth:`observe` it now;
        the progress, and :meth:`left` as an ETA: H:MM:SS, with " + testing" while no
        run has been timed from its last update to its end, None before one run's pace
        is known."""
        progress, now = [run_progress(d) for d in run_dirs], time.monotonic()
        self.observe(now, progress, running, ended)
        seconds, timed = self.left(now, progress, running, ended)
        if seconds is None:
            return progress, None
        return progress, clock(seconds) + ("" if timed else " + testing")
