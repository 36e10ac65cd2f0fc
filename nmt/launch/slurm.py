"""``nmt compare --launcher slurm``: a study's runs as one SLURM job array, through
submitit (the ``slurm`` extra), as fairseq and Hydra users submit.

Every run that is not finished, tested and decoded the spec's ways (a decoding added
to a finished study too) becomes one job of the array, with the spec's ``launcher``
resources; ``max_running`` caps how many run at once.
A job runs :func:`nmt.launch.runs.bring_up`, so a run resumes from its
``last.pt`` wherever it was stopped. Pre-emption and time limits: the array is
submitted with ``--requeue`` and asks for SIGUSR2 two minutes before the limit;
on that warning the job asks SLURM to requeue it, SLURM stops it with SIGTERM,
on which nmt saves ``last.pt``, and the requeued job resumes. A job stopped so
leaves no result, and its run is not counted as failed.

The job ids go to ``OUT/slurm/jobs.json``: a later ``nmt compare SPEC`` (after
``--no-wait``, or after this one was stopped) waits for the jobs still queued or
running instead of submitting their runs again. SLURM's accounting (``sacct``)
is not needed: the states (and why a job waits) come from ``squeue``, the
outcomes from a small JSON file each job writes (``OUT/slurm/results/JOB.json``,
checked when read). The pickles submitit writes beside it are never loaded: in
a directory a cluster often shares, a replaced pickle would run code as the user.

sbatch's refusals (a partition, memory, GPUs or an option the cluster does not
have) are one line with SLURM's reason and the spec key that asked for it, and
leave no file behind; a job that waits for a reason that never clears (more
CPUs than any node has) is cancelled and named the same way.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import torch

from nmt import install_hint
from nmt.errors import NmtError, brief
from nmt.io.files import write_text
from nmt.launch.runs import Decodings, Launch, Launcher, RunResult, bring_up, done
from nmt.launch.watch import SUMMARY_SECONDS, StudyClock
from nmt.progress import clock, console, eta, log_line, progress_bar
from nmt.setup.compare import LauncherSpec, PlannedRun
from nmt.setup.config import from_dict
from nmt.setup.plugins import with_plugins
from nmt.setup.recipe import RunConfig
from nmt.training.signals import Interrupted, Terminated

JOBS = "jobs.json"  # in OUT/slurm: run directory -> the SLURM job id of its last submission
RESULTS = "results"  # in OUT/slurm: JOB.json, each job's outcome
POLL_SECONDS = 3.0  # how often the study asks SLURM about its jobs (squeue)
RESULT_POLL_SECONDS = 0.5  # how often it looks for the results its jobs wrote
WARNING_SECONDS = 120  # SIGUSR2 this long before the time limit: requeue, resume
QUEUED = {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "CONFIGURING", "SUSPENDED"}
LOG_LINES = 12  # of a failed job's log, in its error
# squeue reasons a pending job never leaves without a change of its request, and the
# spec key that asked for what the cluster cannot give
NEVER_STARTS = {
    "BadConstraints": "launcher.sbatch",
    "PartitionConfig": "launcher.cpus",
    "PartitionNodeLimit": "launcher.cpus",
    "PartitionTimeLimit": "launcher.time",
    "ReqNodeNotAvail": "launcher.partition",
    "InvalidAccount": "launcher.account",
    "InvalidQOS": "launcher.sbatch",
}
# words of sbatch's refusal -> the spec key that asked for it (the first that matches)
REFUSED_KEYS = (
    ("partition", "launcher.partition"),
    ("account", "launcher.account"),
    ("memory", "launcher.mem_gb"),
    ("gres", "launcher.gpus"),
    ("gpu", "launcher.gpus"),
    ("time limit", "launcher.time"),
    ("cpu", "launcher.cpus"),
    ("node configuration", "launcher.cpus"),
    ("unrecognized option", "launcher.sbatch"),
    ("invalid option", "launcher.sbatch"),
    ("qos", "launcher.sbatch"),
)


class RunJob:
    """What one job of the array runs: bring one run up with the job's CPUs. It holds
    plain data only (the requested recipe, not its config objects), so that the job
    unpickles it before importing the recipe's plug-ins, and then builds the run."""

    # a job queued by an nmt before jobs decoded their runs has none in its pickle:
    # the study decodes those runs when it collects them
    decodings: Decodings = ()

    def __init__(
        self,
        run: PlannedRun,
        splits: tuple[str, ...],
        device: str,
        folder: Path,
        decodings: Decodings = (),
    ) -> None:
        self.variant, self.seed, self.run_dir = run.variant, run.seed, run.run_dir
        self.recipe, self.splits, self.device = run.recipe, splits, device
        self.folder, self.decodings = folder, decodings

    def __call__(self) -> RunResult:
        torch.set_num_threads(int(os.environ.get("SLURM_CPUS_PER_TASK", torch.get_num_threads())))
        signal.signal(signal.SIGUSR2, _requeue_me)
        try:
            recipe = with_plugins(self.recipe)  # imports them, as load_spec did
            cfg = from_dict(RunConfig, recipe)
            run = PlannedRun(self.variant, self.seed, self.run_dir, recipe, cfg)
            result = bring_up(run, self.splits, self.device, self.decodings)
        except (Interrupted, Terminated, KeyboardInterrupt) as e:
            # Stopped by the scheduler (requeued, pre-empted, cancelled): last.pt is
            # saved. No result, so that the study waits for the requeued job.
            raise SystemExit(getattr(e, "code", 143)) from None
        except Exception as e:
            self._record("failed", " ".join(str(e).split()) or type(e).__name__)
            raise
        self._record(result.status, result.error)
        return result

    def _record(self, status: str, error: str | None) -> None:
        """This job's outcome, as the study reads it (:func:`read_outcome`)."""
        record = {"run_dir": str(self.run_dir), "status": status, "error": error}
        write_text(self.folder / RESULTS / f"{job_name()}.json", json.dumps(record) + "\n")


def job_name() -> str:
    """This job's id as squeue and jobs.json give it: ARRAY_TASK for an array task."""
    job = os.environ.get("SLURM_ARRAY_JOB_ID")
    task = os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{job}_{task}" if job and task else os.environ.get("SLURM_JOB_ID", "")


def _requeue_me(signum: int, frame: Any) -> None:
    """The time limit is near: have SLURM requeue this job (it then stops it with
    SIGTERM, on which the run saves last.pt)."""
    subprocess.run(["scontrol", "requeue", job_name()], check=False, timeout=60)


def submitit_module() -> Any:
    try:
        import submitit
    except ImportError:
        raise NmtError(f"--launcher slurm needs submitit: {install_hint('slurm')}") from None
    return submitit


class SlurmLauncher(Launcher):
    """``launcher.kind: slurm``: every unfinished run as one job of a SLURM job array
    (the spec's resources per job); ``--jobs`` is the cluster's to decide."""

    detaches = True

    def launch(self, job: Launch) -> list[RunResult] | None:
        return launch(
            job.planned, job.splits, job.device, job.spec, job.out, job.wait, job.decodings
        )


def launch(
    planned: list[PlannedRun],
    splits: tuple[str, ...],
    device: str,
    launcher: LauncherSpec,
    out: Path,
    wait: bool = True,
    decodings: Decodings = (),
) -> list[RunResult] | None:
    """Submit every run not yet done (:func:`~nmt.launch.runs.done`: its ``decodings``
    too), nor queued or running from an earlier call, then wait for all of them and
    return their outcomes in plan order; None with ``wait=False``, once submitted."""
    submitit = submitit_module()
    folder = out / "slurm"
    known = _read_jobs(folder)
    states = squeue()
    todo = [
        r
        for r in planned
        if not done(r, splits, decodings) and states.get(known.get(str(r.run_dir), "")) is None
    ]
    if todo:
        jobs = submit(submitit, todo, splits, device, launcher, folder, decodings)
        known.update({str(r.run_dir): j.job_id for r, j in zip(todo, jobs)})
        try:
            write_text(folder / JOBS, json.dumps(known, indent=2) + "\n")
        except NmtError as e:  # jobs the study cannot find again would run twice
            for job in jobs:
                job.cancel(check=False)
            raise NmtError(f"{e}; the {len(jobs)} job(s) just submitted were cancelled") from None
        array = jobs[0].job_id.split("_")[0]
        console.print(f"submitted {len(todo)} of {len(planned)} runs as SLURM job array {array}")
    if not wait:
        console.print("not waiting (--no-wait): run the same nmt compare again to collect them")
        return None
    return collect(submitit, planned, splits, known, folder, decodings)


def submit(
    submitit: Any,
    runs: list[PlannedRun],
    splits: tuple[str, ...],
    device: str,
    launcher: LauncherSpec,
    folder: Path,
    decodings: Decodings = (),
) -> list[Any]:
    """One job array of ``runs`` with the launcher's resources."""
    executor = submitit.SlurmExecutor(folder=folder / "%A", max_num_timeout=100)
    extra: dict[str, Any] = {"requeue": True, **launcher.sbatch}
    if launcher.account:
        extra["account"] = launcher.account
    params: dict[str, Any] = {
        "time": launcher.time,
        "cpus_per_task": launcher.cpus,
        "job_name": f"nmt-{folder.parent.name}",
        "signal_delay_s": WARNING_SECONDS,
        "additional_parameters": extra,
    }
    if launcher.partition:
        params["partition"] = launcher.partition
    if launcher.gpus:
        params["gpus_per_node"] = launcher.gpus
    if launcher.mem_gb is not None:
        params["mem"] = f"{int(launcher.mem_gb * 1024)}M"
    if launcher.max_running:
        params["array_parallelism"] = launcher.max_running
    executor.update_parameters(**params)
    before = set(folder.rglob("*")) if folder.is_dir() else set()
    # submitit prints sbatch's refusal, and logs any failure in its batch, before
    # raising it: it is said once, below
    quiet = contextlib.redirect_stderr(io.StringIO())
    try:
        with quiet, silenced("submitit"), executor.batch():
            jobs = [executor.submit(RunJob(run, splits, device, folder, decodings)) for run in runs]
    except Exception as e:  # sbatch's refusal, a write, or its pickling on a full disk
        for left in sorted(set(folder.rglob("*")) - before, reverse=True):  # files, then dirs
            if left.is_file() or left.is_symlink():
                left.unlink(missing_ok=True)
            else:
                left.rmdir()
        raise NmtError(refusal(e, folder)) from None
    return jobs


@contextlib.contextmanager
def silenced(name: str) -> Iterator[None]:
    """The logger ``name`` says nothing for the block (its handlers hold the stderr
    of import time, which redirect_stderr does not reach)."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def refusal(error: Exception, folder: Path) -> str:
    """sbatch's refusal (or a write that failed) as one line: SLURM's reason and the
    spec key that asked for what the cluster cannot give."""
    if isinstance(error, OSError):
        return f"{folder}: cannot write the job files ({error.strerror or error})"
    if type(error).__name__ != "FailedJobError":
        return f"{folder}: the job array was not submitted ({type(error).__name__}: {brief(error)})"
    lines = [x.strip() for x in str(error).splitlines() if x.strip()]
    said = [x for x in lines if x.startswith("sbatch:")] or [x for x in lines if "--help" not in x]
    reasons = [x.removeprefix("sbatch: ").removeprefix("error: ") for x in said]
    reason = "; ".join(dict.fromkeys(reasons)) or "no reason given"
    key = next((k for word, k in REFUSED_KEYS if word in reason.lower()), "launcher")
    return f"{key}: SLURM refused the job array: {reason}"


def collect(
    submitit: Any,
    planned: list[PlannedRun],
    splits: tuple[str, ...],
    known: dict[str, str],
    folder: Path,
    decodings: Decodings = (),
) -> list[RunResult]:
    """Wait with a bar of runs queued, running, done and failed, runs ended a minute
    and an ETA (in a log, a line whenever those counts change and one a minute with
    the rate and the ETA); the outcomes. A job that has written its result is taken
    at once (a look at one directory, every :data:`RESULT_POLL_SECONDS`); SLURM is
    asked about the others (squeue) every :data:`POLL_SECONDS`, which also finds
    those that ended without one. The ETA is :class:`StudyClock`'s, read from the
    runs' logs (the jobs write them where the study reads), as if as many jobs as run
    now ran until the end; before any job's pace is known, from the runs ended."""
    outcomes: dict[int, RunResult] = {}
    asked, states, said, logged, start = -math.inf, {}, "", time.monotonic(), time.monotonic()
    timer, left, first = StudyClock(1), "?", None
    with progress_bar() as bar:
        task = bar.add_task("study", total=len(planned), rate=0.0, unit="runs/min", info="")
        while True:
            fresh = time.monotonic() - asked >= POLL_SECONDS
            if fresh:
                states, asked = squeue(), time.monotonic()
                never_starts(states, known)
            counts, waiting, active = take_outcomes(
                submitit, planned, (splits, decodings), (known, folder, states), outcomes
            )
            first = len(outcomes) if first is None else first  # ended before this poll
            elapsed = time.monotonic() - start
            if fresh or len(outcomes) == len(planned):  # the runs' logs, as SLURM is asked
                left = study_eta(timer, planned, active, outcomes, (first, elapsed))
            speed = (len(outcomes) - first) / max(elapsed, 1e-9) * 60
            info = ", ".join(f"{counts[k]} {k}" for k in ("queued", "running", "done", "failed"))
            if waiting:  # squeue's reasons: why the queued ones wait
                info += " (waiting: " + ", ".join(f"{r} {n}" for r, n in waiting.items()) + ")"
            bar.update(task, completed=len(outcomes), info=info, rate=speed, eta=left)
            if info != said or time.monotonic() - logged >= SUMMARY_SECONDS:
                rates = f"{speed:,.1f} runs/min, elapsed {clock(elapsed)}, ETA {left}"
                log_line(f"study: {info}, {rates}")
                said, logged = info, time.monotonic()
            if len(outcomes) == len(planned):
                return [outcomes[i] for i in range(len(planned))]
            time.sleep(RESULT_POLL_SECONDS)


def take_outcomes(
    submitit: Any,
    planned: list[PlannedRun],
    asked: tuple[tuple[str, ...], Decodings],
    seen: tuple[dict[str, str], Path, dict[str, Queued]],
    outcomes: dict[int, RunResult],
) -> tuple[Counter, Counter, set[int]]:
    """The outcomes of the runs that ended since the last poll, into ``outcomes``: a
    result its job wrote, or a job SLURM no longer knows (``seen``: the runs' job ids,
    the study's slurm folder, squeue's states). What it returns: the runs queued,
    running, done and failed; squeue's reasons why the queued ones wait; the runs
    whose jobs run."""
    (splits, decodings), (known, folder, states) = asked, seen
    written = {p.stem for p in (folder / RESULTS).glob("*.json")}
    counts, waiting, active = Counter(), Counter(), set()
    for i, run in enumerate(planned):
        job_id = known.get(str(run.run_dir))
        state = states.get(job_id or "")
        if i not in outcomes and (job_id in written or state is None):
            if job_id is not None and (job_id in written or not done(run, splits, decodings)):
                outcomes[i] = outcome(submitit, run, job_id, folder)
            else:  # finished before this study submitted anything
                outcomes[i] = RunResult(run.variant, run.seed, run.run_dir, "reused")
        if i in outcomes:
            counts["failed" if outcomes[i].status == "failed" else "done"] += 1
        elif state is not None:
            queued = state.state in QUEUED
            counts["queued" if queued else "running"] += 1
            if queued and state.reason not in ("None", ""):
                waiting[state.reason] += 1
            if not queued:
                active.add(i)
    return counts, waiting, active


def study_eta(
    timer: StudyClock,
    planned: list[PlannedRun],
    active: set[int],
    outcomes: dict[int, RunResult],
    counted: tuple[int, float],
) -> str:
    """The time the study has left: ``timer``'s, with as many slots as jobs run now;
    before any job's pace is known, at the pace of the runs ended since the study
    began to wait (``counted``: how many had ended then, and the seconds since)."""
    timer.slots = max(len(active), 1)
    _, left = timer.poll([run.run_dir for run in planned], active, set(outcomes))
    first, elapsed = counted
    return left or eta(len(outcomes) - first, len(planned) - first, elapsed)


def read_outcome(folder: Path, job_id: str) -> tuple[str, str | None] | None:
    """A job's (status, error) from the JSON file it wrote, checked; None if it wrote
    none (stopped, or still running); a damaged file is a failure saying so."""
    path = folder / RESULTS / f"{job_id}.json"
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        return "failed", f"{path}: damaged ({type(e).__name__})"
    status, error = (
        (record.get(k) for k in ("status", "error")) if isinstance(record, dict) else (None, None)
    )
    if status not in ("trained", "resumed", "reused", "failed") or not (
        error is None or isinstance(error, str)
    ):
        return "failed", f"{path}: damaged (not a job outcome)"
    return status, error


def outcome(submitit: Any, run: PlannedRun, job_id: str, folder: Path) -> RunResult:
    """A job that has left the queue: its RunResult, or a failure naming the job, with
    the last lines of its log in RUN/error.log."""
    job = submitit.SlurmJob(folder=folder / "%A", job_id=job_id)
    recorded = read_outcome(folder, job_id)
    if recorded is not None:
        status, error = recorded
        if status != "failed":
            return RunResult(run.variant, run.seed, run.run_dir, status)
        why = error or "failed"
    else:
        why = (
            "ended without a result (cancelled, or killed at its time limit without a "
            "requeue); run the same nmt compare again to resume it from its last.pt"
        )
    message = f"SLURM job {job_id}: {why} (log: {job.paths.stderr})"
    tail = _log_tail(job)
    if run.run_dir.is_dir():
        write_text(run.run_dir / "error.log", f"{message}\n\nthe end of its log:\n{tail}\n")
    console.print(f"[red]{run.variant} seed {run.seed} failed:[/red] {message}")
    return RunResult(run.variant, run.seed, run.run_dir, "failed", message)


def _log_tail(job: Any) -> str:
    lines = []
    for path in (job.paths.stdout, job.paths.stderr):
        try:
            lines += Path(path).read_text(errors="replace").splitlines()[-LOG_LINES:]
        except OSError:
            continue
    return "\n".join(lines)


class Queued(NamedTuple):
    state: str  # PENDING, RUNNING, ...
    reason: str  # why it waits (squeue's %r), "None" when it does not


def never_starts(states: dict[str, Queued], known: dict[str, str]) -> None:
    """Cancel this study's jobs that wait for a reason that never clears, and say which
    spec key asked for what the cluster cannot give."""
    ours = set(known.values())
    stuck = {j: q.reason for j, q in states.items() if j in ours and q.reason in NEVER_STARTS}
    if not stuck:
        return
    subprocess.run(["scancel", *stuck], check=False, timeout=60, capture_output=True)
    job, reason = next(iter(stuck.items()))
    raise NmtError(
        f"{NEVER_STARTS[reason]}: SLURM job {job} can never start ({reason}: the cluster "
        f"cannot give what the spec asks for); cancelled {len(stuck)} such job(s)"
    )


def squeue() -> dict[str, Queued]:
    """Every job (array tasks one by one) that SLURM has queued or running: id -> its
    state and why it waits."""
    try:
        done = subprocess.run(
            ["squeue", "--array", "--noheader", "--format=%i %T %r"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise NmtError(f"squeue: {e}; is SLURM reachable from here?") from None
    if done.returncode != 0:
        raise NmtError(f"squeue failed: {done.stderr.strip() or done.returncode}")
    states = {}
    for line in done.stdout.splitlines():
        parts = line.split(maxsplit=2)
        if len(parts) >= 2:
            states[parts[0]] = Queued(parts[1], parts[2] if len(parts) > 2 else "None")
    return states


def _read_jobs(folder: Path) -> dict[str, str]:
    path = folder / JOBS
    if path.exists() and not path.is_file():
        raise NmtError(f"{path}: not a file; move it away to submit the study")
    if not path.is_file():
        return {}
    try:
        jobs = json.loads(path.read_text())
    except ValueError as e:
        raise NmtError(f"{path}: damaged ({e}); delete it to submit every unfinished run") from None
    if not isinstance(jobs, dict):
        raise NmtError(f"{path}: damaged (not a mapping); delete it to submit again")
    return {str(k): str(v) for k, v in jobs.items()}
