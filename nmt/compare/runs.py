"""Bring every planned run to "trained and evaluated": reuse what is finished, resume
what was interrupted, train the rest; a failing run is recorded, not fatal."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from nmt.compare.spec import PlannedRun
from nmt.compare.watch import study_progress
from nmt.decoding.evaluate import evaluate, read_results
from nmt.errors import NmtError
from nmt.io.files import write_text
from nmt.io.rundir import flatten
from nmt.progress import clock, console, eta, log_line, progress_bar, warn
from nmt.setup.migrations import upgrade_recipe
from nmt.setup.plugins import import_plugins
from nmt.training.run import SUMMARY, read_summary, train
from nmt.training.signals import Interrupted, Terminated, terminable

REQUESTED = "requested.yaml"  # the recipe a compare run was asked for, before resolution
RESOLVED = "recipe.yaml"  # the recipe it was trained with, every default filled in
POLL_SECONDS = 2.0  # how often the study's bar reads the runs' logs under --jobs
ORPHAN_POLL_SECONDS = 1.0  # how often a worker checks that its study process lives
SUMMARY_SECONDS = 60.0  # how often a study in a log (no terminal) prints where it stands


@dataclass(frozen=True)
class RunResult:
    variant: str
    seed: int
    run_dir: Path
    status: str  # trained | resumed | reused | failed
    error: str | None = None  # one line, for the table; the traceback is in RUN/error.log
    tag: str = ""  # another decoding of the run: its results are SPLIT@TAG (nmt evaluate)


LOGGING_KEYS = ("log_to", "tensorboard_dir", "mlflow_uri", "wandb_dir", "experiment", "run_name")


def without_logging(recipe: Any) -> Any:
    """A recipe without where its run logs (``train.log_to`` and the trackers' keys):
    logging elsewhere does not make another run, so it does not stop reuse."""
    if not isinstance(recipe, dict) or not isinstance(recipe.get("train"), dict):
        return recipe
    train = {k: v for k, v in recipe["train"].items() if k not in LOGGING_KEYS}
    return {**recipe, "train": train}


def check_reusable(run: PlannedRun) -> None:
    """A run directory made for a different recipe is not silently reused or overwritten."""
    path = run.run_dir / REQUESTED
    if not path.is_file():
        return
    try:
        requested = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise NmtError(f"{path}: damaged ({type(e).__name__}); delete it to rebuild it") from None
    if without_logging(upgrade_recipe(requested)) != without_logging(run.recipe):
        raise NmtError(
            f"{run.run_dir} was trained for a different recipe than the spec now asks for; "
            "move it away or choose another out_dir"
        )
    changed = default_changes(run)
    if changed:
        raise NmtError(
            f"{run.run_dir} was trained with {'; '.join(changed)} (a default has changed "
            "since); name the value in the spec's variant, or move the run away"
        )


def default_changes(run: PlannedRun) -> list[str]:
    """What the run was trained with, where the same request now means something else,
    as ``key old, now new``: a default changed since (hard attention's estimator was
    reinforce). Values the run measured on its data (left None in the plan) and keys
    added since (absent from the run's recipe) are no change."""
    path = run.run_dir / RESOLVED
    if not path.is_file():  # training never started
        return []
    try:
        trained = flatten(without_logging(upgrade_recipe(yaml.safe_load(path.read_text("utf-8")))))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError) as e:
        warn(f"{path}: damaged ({type(e).__name__}); its defaults are not checked")
        return []
    planned = flatten(without_logging(yaml.safe_load(run.cfg.to_yaml())))
    return [
        f"{key} {trained[key]!r}, now {value!r}"
        for key, value in sorted(planned.items())
        if key in trained and value is not None and trained[key] != value
    ]


def finished_run(run_dir: Path) -> bool:
    """Whether training finished (a readable summary); a damaged summary is rebuilt by
    resuming, which ends at once where the budget is spent."""
    try:
        return read_summary(run_dir) is not None
    except NmtError:
        warn(f"{run_dir / SUMMARY} was damaged; resuming to rebuild it")
        return False


def bring_up(run: PlannedRun, splits: tuple[str, ...], device: str) -> RunResult:
    """Train (or resume, or reuse) one run and make sure every split is evaluated."""
    finished = finished_run(run.run_dir)
    resume = not finished and (run.run_dir / "last.pt").is_file()
    status = "reused" if finished else "resumed" if resume else "trained"
    console.rule(f"{run.variant} seed {run.seed}: {status} ({run.run_dir})")
    try:
        if not finished:
            run.run_dir.mkdir(parents=True, exist_ok=True)
            write_text(run.run_dir / REQUESTED, yaml.safe_dump(run.recipe, sort_keys=False))
            train(run.cfg, device=device, resume=resume)
        done = read_results(run.run_dir)
        missing = [s for s in splits if s not in done]
        if missing:
            evaluate(run.run_dir, missing, device=device)
    except (Interrupted, KeyboardInterrupt):
        raise
    except Exception as e:  # one broken variant must not stop the study
        return failed(RunResult(run.variant, run.seed, run.run_dir, status), e)
    (run.run_dir / "error.log").unlink(missing_ok=True)  # an earlier try's, now stale
    return RunResult(run.variant, run.seed, run.run_dir, status)


def bring_up_all(
    planned: list[PlannedRun], splits: tuple[str, ...], device: str, jobs: int = 1
) -> list[RunResult]:
    """Bring up every run, ``jobs`` at a time; results in plan order. With more than
    one job each run trains in its own process (a fresh interpreter, so that each has
    its own thread pool) on 1/jobs of the CPU threads, or beside the others on the
    GPU; its output goes to RUN/compare.log.

    SIGINT or SIGTERM to this process (a scheduler or systemd signals the main
    process only) reaches every worker: each saves its ``last.pt`` and stops, no run
    starts after it, and the study raises :class:`Interrupted` once every worker
    has gone, so that running it again resumes."""
    if jobs == 1:
        outcomes = []
        for run in planned:
            log_line(f"{run.variant} seed {run.seed}: started")
            outcomes.append(bring_up(run, splits, device))
            log_line(f"{run.variant} seed {run.seed}: {outcomes[-1].status}")
        return outcomes
    threads = max(1, torch.get_num_threads() // jobs)
    console.print(f"{len(planned)} runs, {jobs} at a time ({threads} CPU threads each)")
    context = multiprocessing.get_context("spawn")
    stopping = context.Event()
    run_dirs = [r.run_dir for r in planned]
    start, (first, _) = time.perf_counter(), study_progress(run_dirs)
    plugins = tuple(dict.fromkeys(p for r in planned for p in r.cfg.plugins))
    pool = ProcessPoolExecutor(
        jobs,
        mp_context=context,
        initializer=_start_worker,
        initargs=(stopping, os.getpid(), plugins),
    )
    with pool, progress_bar() as bar:
        task = bar.add_task("study", total=None, rate=0.0, unit="updates/s", info="")
        futures = [pool.submit(_bring_up_in_worker, r, splits, device, threads) for r in planned]
        waiting, started, logged = set(futures), set(), start
        try:
            while waiting:
                finished, waiting = wait(waiting, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
                for future, run in zip(futures, planned):  # in a log: when each starts
                    if future not in started and (future.running() or future.done()):
                        started.add(future)
                        log_line(f"{run.variant} seed {run.seed}: started")
                for future in finished:
                    result = future.result()
                    bar.console.print(f"{result.variant} seed {result.seed}: {result.status}")
                done, total = study_progress(run_dirs)
                elapsed = time.perf_counter() - start
                rate = (done - first) / max(elapsed, 1e-9)
                bar.update(task, completed=done, total=total, rate=rate)
                if time.perf_counter() - logged >= SUMMARY_SECONDS:  # in a log: a summary
                    logged = time.perf_counter()
                    ended = len(futures) - len(waiting)
                    left = eta(done - first, total - first if total else None, elapsed)
                    log_line(
                        f"study: {done:,}/{total or '?'} updates, {ended} runs done, "
                        f"{len(started) - ended} running, {rate:,.1f} updates/s, "
                        f"elapsed {clock(elapsed)}, ETA {left}"
                    )
        except (KeyboardInterrupt, Terminated) as e:
            code = 130 if isinstance(e, KeyboardInterrupt) else 143
            stop_workers(stopping, futures)
            raise Interrupted(
                code,
                f"{'interrupted' if code == 130 else 'terminated'}: every running run saved "
                "its last.pt; run the same nmt compare again to resume the study",
            ) from None
    return [future.result() for future in futures]


def stop_workers(stopping: Any, futures: list[Future]) -> None:
    """Start no more runs, pass SIGTERM to every worker (each saves ``last.pt``),
    and wait until they have all finished."""
    stopping.set()
    for future in futures:
        future.cancel()
    with terminable():  # a second signal while they save changes nothing
        for child in multiprocessing.active_children():
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGTERM)
        while True:
            try:
                wait(futures)
                return
            except Terminated:
                continue


class _Worker:
    """This process's state as a study's worker (set by :func:`_start_worker`)."""

    stopping: Any = None  # the study's "stop" event
    parent = 0  # the study process's pid
    busy = False  # bringing up a run (else waiting for one)


def _start_worker(stopping: Any, parent: int, plugins: tuple[str, ...] = ()) -> None:
    """A worker's set-up: the study's plug-ins imported before any run reaches it (a run's
    config may be of a class that a plug-in defines). SIGTERM or SIGINT (Ctrl-C reaches
    the whole process group) unwinds a run it is bringing up (training turns it into a
    saved ``last.pt``) and is only noted while it waits for a run (the study then gives
    it none). A worker whose study process died without passing the signal on (kill -9)
    stops itself, so that no orphan trains on."""
    _Worker.stopping, _Worker.parent = stopping, parent
    import_plugins(plugins)
    signal.signal(signal.SIGTERM, _on_signal)
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # a background study's stays
        signal.signal(signal.SIGINT, _on_signal)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(ORPHAN_POLL_SECONDS)
        stopping.set()
        if not _Worker.busy:
            os._exit(143)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True).start()


def _on_signal(signum: int, frame: Any) -> None:
    if _Worker.busy:
        raise KeyboardInterrupt if signum == signal.SIGINT else Terminated


def _bring_up_in_worker(
    run: PlannedRun, splits: tuple[str, ...], device: str, threads: int
) -> RunResult:
    if _Worker.stopping.is_set():
        return RunResult(run.variant, run.seed, run.run_dir, "failed", "not started (stopped)")
    _Worker.busy = True
    torch.set_num_threads(threads)
    try:
        run.run_dir.mkdir(parents=True, exist_ok=True)
        with (
            open(run.run_dir / "compare.log", "a", encoding="utf-8") as log,
            contextlib.redirect_stdout(log),
            contextlib.redirect_stderr(log),
        ):
            return bring_up(run, splits, device)
    except (Interrupted, KeyboardInterrupt, Terminated):  # last.pt is saved: the next resumes
        return RunResult(run.variant, run.seed, run.run_dir, "failed", "interrupted")
    finally:
        _Worker.busy = False
        if os.getppid() != _Worker.parent:
            os._exit(143)  # an orphan: nobody is left to take the result or give more work


def failed(run: RunResult, error: Exception) -> RunResult:
    """Record a failure: one line for the table, the traceback in RUN/error.log."""
    message = " ".join(str(error).split()) or type(error).__name__
    if run.run_dir.is_dir():
        write_text(run.run_dir / "error.log", traceback.format_exc())
    console.print(f"[red]{run.variant} seed {run.seed} failed:[/red] {message}")
    return RunResult(run.variant, run.seed, run.run_dir, "failed", message)
