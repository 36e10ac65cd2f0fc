"""``nmt compare --jobs N`` stopped by its supervisor: SIGTERM to the study process
alone reaches every worker, each saves ``last.pt``, nothing is left running, and
the same command resumes the study."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from nmt.io import checkpoint
from tests.compare.test_compare import write_spec
from tests.conftest import as_in_a_terminal, subprocess_env
from tests.test_cli import invoke

STEPS = 120
# A worker looks for its study process once a second (PARENT_POLL_SECONDS) and a tiny
# step can take a few milliseconds: after kill -9, enough steps that the second
# before it notices cannot take it to the end.
ORPHAN_STEPS = 5000


def children(pid: int) -> set[int]:
    """The processes whose parent is ``pid``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def compare(spec: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "nmt", "compare", str(spec), "--device", "cpu", "--jobs", "2"],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a group of its own: the tests signal it, or one process
        preexec_fn=as_in_a_terminal,
    )


def steps_logged(run: Path) -> int:
    path = run / "metrics.jsonl"
    return len(path.read_bytes().splitlines()) if path.is_file() else 0


def start_study(tmp_path: Path, toy_dir: Path, steps: int = STEPS) -> tuple[Path, list[Path]]:
    variants = {"global": [], "local_m": ["model.attention.kind=local_m"]}
    spec = write_spec(tmp_path, toy_dir, variants, seeds=(1,))
    raw = yaml.safe_load(spec.read_text())
    raw["set"] = [f"train.max_steps={steps}", f"train.valid_every={steps}", "train.log_every=1"]
    spec.write_text(yaml.safe_dump(raw))
    return spec, [tmp_path / "study/runs/global/seed1", tmp_path / "study/runs/local_m/seed1"]


def training(proc: subprocess.Popen, runs: list[Path]) -> set[int]:
    """Wait until every run has taken a few steps; the study's worker processes."""
    deadline = time.time() + 120
    while min(map(steps_logged, runs)) < 3 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    workers = children(proc.pid)
    assert proc.poll() is None and len(workers) >= 2, proc.stderr.read().decode()[-2000:]
    return workers


def gone(workers: set[int], seconds: float) -> bool:
    deadline = time.time() + seconds
    while any(map(running, workers)) and time.time() < deadline:
        time.sleep(0.1)
    return not any(map(running, workers))


@pytest.mark.slow
def test_sigterm_to_the_study_stops_every_worker_and_a_rerun_resumes(tmp_path, toy_dir):
    spec, runs = start_study(tmp_path, toy_dir)
    proc = compare(spec)
    workers = training(proc, runs)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err.decode()[-3000:]
    assert b"run the same nmt compare again to resume" in err and b"Traceback" not in err
    assert gone(workers, 10)  # no orphan trains on
    stopped = [checkpoint.load(r / "last.pt")["state"]["step"] for r in runs]
    assert all(0 < s < STEPS for s in stopped), stopped

    # the same command again, here (its workers are processes of their own as before)
    again = invoke("compare", spec, "--device", "cpu", "--jobs", "2")
    assert again.exit_code == 0, again.output[-3000:]
    for run in runs:
        assert f"{run.parent.name} seed 1: resumed" in (run / "compare.log").read_text()
        assert checkpoint.load(run / "last.pt")["state"]["step"] == STEPS
    assert (tmp_path / "study/report.md").is_file()
    assert os.path.isfile(runs[0] / "test.hyp")


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_to_the_whole_group_stops_as_cleanly(tmp_path, toy_dir, sig, code):
    """A terminal's Ctrl-C (SIGINT) or a group kill reaches the workers directly too:
    each saves once and exits, none waits for work that never comes."""
    spec, runs = start_study(tmp_path, toy_dir)
    proc = compare(spec)
    workers = training(proc, runs)
    os.killpg(proc.pid, sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code and b"Traceback" not in err, err.decode()[-3000:]
    assert gone(workers, 10)
    assert all(0 < checkpoint.load(r / "last.pt")["state"]["step"] < STEPS for r in runs)


@pytest.mark.slow
def test_workers_of_a_study_killed_with_sigkill_stop_on_their_own(tmp_path, toy_dir):
    """kill -9 leaves no chance to pass a signal on: each worker notices that its
    study process is gone, saves last.pt and exits."""
    spec, runs = start_study(tmp_path, toy_dir, ORPHAN_STEPS)
    proc = compare(spec)
    workers = training(proc, runs)
    proc.kill()
    proc.communicate(timeout=60)
    assert gone(workers, 30)
    stopped = [checkpoint.load(r / "last.pt")["state"]["step"] for r in runs]
    assert all(0 < s < ORPHAN_STEPS for s in stopped), stopped
