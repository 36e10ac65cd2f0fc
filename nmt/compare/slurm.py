"""``nmt compare --launcher slurm``: a study's runs as one SLURM job array, through
submitit (the ``slurm`` extra), as fairseq and Hydra users submit.

Every run that is not finished and evaluated becomes one job of the array, with
the spec's ``launcher`` resources; ``max_running`` caps how many run at once.
A job runs :func:`nmt.compare.runs.bring_up`, so a run resumes from its
``last.pt`` wherever it was stopped. Pre-emption and time limits: the array is
submitted with ``--requeue`` and asks for SIGUSR2 two minutes before the limit;
on that warning the job asks SLURM to requeue it, SLURM stops it with SIGTERM,
on which nmt saves ``last.pt``, and the requeued job resumes. A job stopped so
leaves no result, and its run is not counted as failed.

The job ids go to ``OUT/slurm/jobs.json``: a later ``nmt compare SPEC`` (after
``--no-wait``, or after this one was stopped) waits for the jobs still queued or
running instead of submitting their runs again. SLURM's accounting (``sacct``)
is not needed: the states come from ``squeue``, the outcomes from the result
files submitit writes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch

from nmt.compare.runs import RunResult, bring_up, finished_run
from nmt.compare.spec import LauncherSpec, PlannedRun
from nmt.config import from_dict
from nmt.errors import NmtError
from nmt.evaluate import read_results
from nmt.files import write_text
from nmt.plugins import with_plugins
from nmt.progress import console, progress_bar
from nmt.recipe import RunConfig
from nmt.training.signals import Interrupted, Terminated

JOBS = "jobs.json"  # in OUT/slurm: run directory -> the SLURM job id of its last submission
POLL_SECONDS = 3.0
WARNING_SECONDS = 120  # SIGUSR2 this long before the time limit: requeue, resume
QUEUED = {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "CONFIGURING", "SUSPENDED"}
LOG_LINES = 12  # of a failed job's log, in its error


class RunJob:
    """What one job of the array runs: bring one run up with the job's CPUs. It holds
    plain data only (the requested recipe, not its config objects), so that the job
    unpickles it before importing the recipe's plug-ins, and then builds the run."""

    def __init__(self, run: PlannedRun, splits: tuple[str, ...], device: str) -> None:
        self.variant, self.seed, self.run_dir = run.variant, run.seed, run.run_dir
        self.recipe, self.splits, self.device = run.recipe, splits, device

    def __call__(self) -> RunResult:
        torch.set_num_threads(int(os.environ.get("SLURM_CPUS_PER_TASK", torch.get_num_threads())))
        signal.signal(signal.SIGUSR2, _requeue_me)
        recipe = with_plugins(self.recipe)  # imports them, as load_spec did
        cfg = from_dict(RunConfig, recipe)
        run = PlannedRun(self.variant, self.seed, self.run_dir, recipe, cfg)
        try:
            return bring_up(run, self.splits, self.device)
        except (Interrupted, Terminated, KeyboardInterrupt) as e:
            # Stopped by the scheduler (requeued, pre-empted, cancelled): last.pt is
            # saved. No result, so that the study waits for the requeued job.
            raise SystemExit(getattr(e, "code", 143)) from None


def _requeue_me(signum: int, frame: Any) -> None:
    """The time limit is near: have SLURM requeue this job (it then stops it with
    SIGTERM, on which the run saves last.pt)."""
    job = os.environ.get("SLURM_ARRAY_JOB_ID")
    task = os.environ.get("SLURM_ARRAY_TASK_ID")
    name = f"{job}_{task}" if job and task else os.environ.get("SLURM_JOB_ID", "")
    subprocess.run(["scontrol", "requeue", name], check=False, timeout=60)


def submitit_module() -> Any:
    try:
        import submitit
    except ImportError:
        raise NmtError("--launcher slurm needs submitit: pip install 'nmt[slurm]'") from None
    return submitit


def launch(
    planned: list[PlannedRun],
    splits: tuple[str, ...],
    device: str,
    launcher: LauncherSpec,
    out: Path,
    wait: bool = True,
) -> list[RunResult] | None:
    """Submit every run not yet done (nor queued or running from an earlier call), then
    wait for all of them and return their outcomes in plan order; None with
    ``wait=False``, once submitted."""
    submitit = submitit_module()
    folder = out / "slurm"
    known = _read_jobs(folder)
    states = squeue()
    todo = [
        r
        for r in planned
        if not _done(r, splits) and states.get(known.get(str(r.run_dir), "")) is None
    ]
    if todo:
        jobs = submit(submitit, todo, splits, device, launcher, folder)
        known.update({str(r.run_dir): j.job_id for r, j in zip(todo, jobs)})
        write_text(folder / JOBS, json.dumps(known, indent=2) + "\n")
        array = jobs[0].job_id.split("_")[0]
        console.print(f"submitted {len(todo)} of {len(planned)} runs as SLURM job array {array}")
    if not wait:
        console.print("not waiting (--no-wait): run the same nmt compare again to collect them")
        return None
    return collect(submitit, planned, splits, known, folder)


def submit(
    submitit: Any,
    runs: list[PlannedRun],
    splits: tuple[str, ...],
    device: str,
    launcher: LauncherSpec,
    folder: Path,
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
    with executor.batch():
        jobs = [executor.submit(RunJob(run, splits, device)) for run in runs]
    return jobs


def collect(
    submitit: Any,
    planned: list[PlannedRun],
    splits: tuple[str, ...],
    known: dict[str, str],
    folder: Path,
) -> list[RunResult]:
    """Wait with a bar of runs queued, running, done and failed; the outcomes."""
    outcomes: dict[int, RunResult] = {}
    with progress_bar() as bar:
        task = bar.add_task("study", total=len(planned), rate=0.0, unit="runs", info="")
        while True:
            states, counts = squeue(), Counter()
            for i, run in enumerate(planned):
                if i in outcomes:
                    counts["failed" if outcomes[i].status == "failed" else "done"] += 1
                    continue
                job_id = known.get(str(run.run_dir))
                state = states.get(job_id or "")
                if state is not None:
                    counts["queued" if state in QUEUED else "running"] += 1
                    continue
                if job_id is not None and (
                    _has_result(submitit, job_id, folder) or not _done(run, splits)
                ):
                    outcomes[i] = outcome(submitit, run, job_id, folder)
                else:  # finished before this study submitted anything
                    outcomes[i] = RunResult(run.variant, run.seed, run.run_dir, "reused")
                counts["failed" if outcomes[i].status == "failed" else "done"] += 1
            info = ", ".join(f"{counts[k]} {k}" for k in ("queued", "running", "done", "failed"))
            bar.update(task, completed=len(outcomes), info=info)
            if len(outcomes) == len(planned):
                return [outcomes[i] for i in range(len(planned))]
            time.sleep(POLL_SECONDS)


def outcome(submitit: Any, run: PlannedRun, job_id: str, folder: Path) -> RunResult:
    """A job that has left the queue: its RunResult, or a failure naming the job, with
    the last lines of its log in RUN/error.log."""
    job = submitit.SlurmJob(folder=folder / "%A", job_id=job_id)
    result_file = Path(job.paths.result_pickle)
    if result_file.is_file():
        kind, value = submitit.core.utils.pickle_load(result_file)
        if kind == "success" and value.status != "failed":
            return value
        why = value.error if kind == "success" else value.strip().splitlines()[-1]
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


def _has_result(submitit: Any, job_id: str, folder: Path) -> bool:
    return Path(
        submitit.SlurmJob(folder=folder / "%A", job_id=job_id).paths.result_pickle
    ).is_file()


def squeue() -> dict[str, str]:
    """Every job (array tasks one by one) that SLURM has queued or running: id -> state."""
    try:
        done = subprocess.run(
            ["squeue", "--array", "--noheader", "--format=%i %T"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise NmtError(f"squeue: {e}; is SLURM reachable from here?") from None
    if done.returncode != 0:
        raise NmtError(f"squeue failed: {done.stderr.strip() or done.returncode}")
    return dict(line.split(maxsplit=1) for line in done.stdout.splitlines() if line.strip())


def _done(run: PlannedRun, splits: tuple[str, ...]) -> bool:
    """Trained and evaluated on every split: nothing left for a job."""
    if not finished_run(run.run_dir):
        return False
    return all(s in read_results(run.run_dir) for s in splits)


def _read_jobs(folder: Path) -> dict[str, str]:
    path = folder / JOBS
    if not path.is_file():
        return {}
    try:
        jobs = json.loads(path.read_text())
    except ValueError as e:
        raise NmtError(f"{path}: damaged ({e}); delete it to submit every unfinished run") from None
    if not isinstance(jobs, dict):
        raise NmtError(f"{path}: damaged (not a mapping); delete it to submit again")
    return {str(k): str(v) for k, v in jobs.items()}
