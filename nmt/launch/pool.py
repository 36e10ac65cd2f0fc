"""The local launcher: a study's runs one after another, or ``--jobs N`` at a time in
worker processes of their own, with signals relayed to every worker and a bar (or
log lines) for the whole study."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

import torch

from nmt.launch.runs import Decodings, Launch, Launcher, RunResult, bring_up, done
from nmt.launch.watch import SUMMARY_SECONDS, StudyClock, study_progress, summed
from nmt.progress import clock, console, eta, info, log_line, progress_bar
from nmt.setup.compare import PlannedRun
from nmt.setup.plugins import import_plugins
from nmt.training.signals import Interrupted, Terminated, terminable

POLL_SECONDS = 2.0  # how often the study's bar reads the runs' logs under --jobs
ORPHAN_POLL_SECONDS = 1.0  # how often a worker checks that its study process lives


class LocalLauncher(Launcher):
    """``launcher.kind: local``: this machine, ``--jobs`` runs at a time."""

    def launch(self, job: Launch) -> list[RunResult]:
        return bring_up_all(job.planned, job.splits, job.device, job.jobs, job.decodings)


def share(threads: int, jobs: int, runs: int) -> tuple[int, int]:
    """How many runs train at once under ``--jobs`` and on how many of the CPU's
    ``threads`` each: never more at once than there are ``runs`` left to bring up
    (to train, evaluate or decode), so that the last run of a resumed study is not left on a
    share meant for two."""
    at_once = max(1, min(jobs, runs))
    return at_once, max(1, threads // at_once)


def bring_up_all(
    planned: list[PlannedRun],
    splits: tuple[str, ...],
    device: str,
    jobs: int = 1,
    decodings: Decodings = (),
) -> list[RunResult]:
    """Bring up every run, ``jobs`` at a time; results in plan order. With more than
    one job each run trains in its own process (a fresh interpreter, so that each has
    its own thread pool) on its share of the CPU threads (:func:`share`), or beside
    the others on the GPU; its output goes to RUN/compare.log.

    SIGINT or SIGTERM to this process (a scheduler or systemd signals the main
    process only) reaches every worker: each saves its ``last.pt`` and stops, no run
    starts after it, and the study raises :class:`Interrupted` once every worker
    has gone, so that running it again resumes."""
    if jobs == 1:
        return bring_up_in_turn(planned, splits, device, decodings)
    todo = sum(not done(run, splits, decodings) for run in planned)  # to train, evaluate or decode
    at_once, threads = share(torch.get_num_threads(), jobs, todo)
    console.print(f"{len(planned)} runs, {at_once} at a time ({threads} CPU threads each)")
    context = multiprocessing.get_context("spawn")
    stopping, news = context.Event(), context.SimpleQueue()
    run_dirs = [r.run_dir for r in planned]
    start, (first, unit) = time.perf_counter(), baseline(len(planned), run_dirs, todo)
    plugins = tuple(dict.fromkeys(p for r in planned for p in r.cfg.plugins))
    pool = ProcessPoolExecutor(
        at_once,
        mp_context=context,
        initializer=_start_worker,
        initargs=(stopping, os.getpid(), plugins, news),
    )
    with pool, progress_bar() as bar:  # a log: log_summary
        task = bar.add_task("study", total=None, rate=0.0, unit=per(unit), info="")
        futures = [
            pool.submit(_bring_up_in_worker, r, splits, device, threads, decodings) for r in planned
        ]
        waiting, running, logged, timer = set(futures), set[str](), start, StudyClock(at_once)
        try:
            while waiting:
                finished, waiting = wait(waiting, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
                log_news(news, running, bar.console.print)
                for future in finished:
                    future.result()  # a broken pool raises here, as it breaks
                spent = time.perf_counter() - start
                now, total, left = measure(futures, run_dirs, running, (unit, first, spent), timer)
                speed = rate(unit, now - first, spent)
                bar.update(task, completed=now, total=total, rate=speed, eta=left)
                if time.perf_counter() - logged >= SUMMARY_SECONDS:  # in a log: a summary
                    logged = time.perf_counter()
                    log_summary(futures, len(running), (first, now, total), spent, unit, left)
        except (KeyboardInterrupt, Terminated) as e:
            code = 130 if isinstance(e, KeyboardInterrupt) else 143
            stop_workers(stopping, futures)
            raise Interrupted(
                code,
                f"{'interrupted' if code == 130 else 'terminated'}: every running run saved "
                "its last.pt; run the same nmt compare again to resume the study",
            ) from None
    return [future.result() for future in futures]


def bring_up_in_turn(
    planned: list[PlannedRun],
    splits: tuple[str, ...],
    device: str,
    decodings: Decodings = (),
) -> list[RunResult]:
    """One run after another in this process, each start and end a log line, and after
    each run that had something to do (to train, test or decode), where the study
    stands: those runs done, the time elapsed and an ETA at their mean time so far (a
    run reused as it is costs nothing, and is not counted)."""
    todo = [not done(run, splits, decodings) for run in planned]
    start, worked, total, outcomes = time.perf_counter(), 0, sum(todo), []
    for run, work in zip(planned, todo):
        log_line(f"{run.variant} seed {run.seed}: started")
        outcomes.append(bring_up(run, splits, device, decodings))
        log_line(f"{run.variant} seed {run.seed}: {outcomes[-1].status}")
        if work:
            worked, elapsed = worked + 1, time.perf_counter() - start
            left = eta(worked, total, elapsed)
            info(f"study: {worked}/{total} runs done, elapsed {clock(elapsed)}, ETA {left}")
    return outcomes


def baseline(runs: int, run_dirs: list[Path], todo: int) -> tuple[int, str]:
    """What the study counts, and how many of it were done at its start: updates while
    any run has some to train; where every run had trained (the study only evaluates
    or decodes them: its updates stand still), runs, of which those with nothing left
    to do end at once."""
    first, total = study_progress(run_dirs)
    if total is not None and first >= total:
        return runs - todo, "runs"
    return first, "updates"


def measure(
    futures: list[Future],
    run_dirs: list[Path],
    running: set[str],
    counting: tuple[str, int, float],
    timer: StudyClock,
) -> tuple[int, int | None, str]:
    """How much of the unit of ``counting`` (:func:`baseline`'s unit and count at the
    start, and the seconds since) is done, the total and the time left: where updates
    are counted, as ``timer`` reckons it with the runs' testing ("?" before any run's
    pace is known, "+ testing" after it while no run has been timed from its last
    update to its end); where runs are, at the pace of their count."""
    ended = {i for i, f in enumerate(futures) if f.done()}
    unit, first, elapsed = counting
    if unit == "runs":
        return len(ended), len(futures), eta(len(ended) - first, len(futures) - first, elapsed)
    active = {i for i, d in enumerate(run_dirs) if str(d) in running}
    progress, left = timer.poll(run_dirs, active, ended)
    return (*summed(progress), left or "?")


def per(unit: str) -> str:
    """The rate's unit: updates a second, runs (minutes each) a minute."""
    return f"{unit}/min" if unit == "runs" else f"{unit}/s"


def rate(unit: str, done: int, elapsed: float) -> float:
    """``done`` of ``unit`` over ``elapsed`` seconds, in :func:`per`'s unit."""
    return max(done, 0) / max(elapsed, 1e-9) * (60 if unit == "runs" else 1)


def log_summary(
    futures: list[Future],
    running: int,
    counts: tuple[int, int, int | None],
    elapsed: float,
    unit: str,
    left: str,
) -> None:
    """Where a study stands, in one log line: ``counts`` of ``unit`` (done when this
    process started, done now, the total; :func:`measure`), runs done (the count
    itself where ``unit`` is runs) and ``running``, the rate and the time ``left``."""
    first, now, total = counts
    runs = "" if unit == "runs" else f", {sum(f.done() for f in futures)} runs"
    log_line(
        f"study: {now:,}/{total or '?'} {unit}{runs} done, {running} running, "
        f"{rate(unit, now - first, elapsed):,.1f} {per(unit)}, elapsed {clock(elapsed)}, "
        f"ETA {left}"
    )


def log_news(news: Any, running: set[str], say: Callable[[str], None]) -> None:
    """The workers' news since the last poll, in the order they sent it (one queue): a
    run taken up (a log line; ``running`` gains it), a run ended (``say``, on the
    terminal too). Not from the futures: a future counts as running from the moment
    it is queued for the workers, before any takes it up, and its result arrives
    apart from the next run's start."""
    while not news.empty():
        run_dir, ended, line = news.get()
        if ended:
            running.discard(run_dir)
            say(line)
        else:
            running.add(run_dir)
            log_line(line)


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
    news: Any = None  # where it says which run it takes up, and how each ended
    parent = 0  # the study process's pid
    busy = False  # bringing up a run (else waiting for one)


def _start_worker(stopping: Any, parent: int, plugins: tuple[str, ...], news: Any) -> None:
    """A worker's set-up: the study's plug-ins imported before any run reaches it (a run's
    config may be of a class that a plug-in defines). SIGTERM or SIGINT (Ctrl-C reaches
    the whole process group) unwinds a run it is bringing up (training turns it into a
    saved ``last.pt``) and is only noted while it waits for a run (the study then gives
    it none). A worker whose study process died without passing the signal on (kill -9)
    stops itself, so that no orphan trains on."""
    _Worker.stopping, _Worker.parent, _Worker.news = stopping, parent, news
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
    run: PlannedRun,
    splits: tuple[str, ...],
    device: str,
    threads: int,
    decodings: Decodings,
) -> RunResult:
    if _Worker.stopping.is_set():
        return RunResult(run.variant, run.seed, run.run_dir, "failed", "not started (stopped)")
    _Worker.busy = True
    name = f"{run.variant} seed {run.seed}"
    _Worker.news.put((str(run.run_dir), False, f"{name}: started"))
    torch.set_num_threads(threads)
    try:
        run.run_dir.mkdir(parents=True, exist_ok=True)
        with (
            open(run.run_dir / "compare.log", "a", encoding="utf-8") as log,
            contextlib.redirect_stdout(log),
            contextlib.redirect_stderr(log),
        ):
            result = bring_up(run, splits, device, decodings)
    except (Interrupted, KeyboardInterrupt, Terminated):  # last.pt is saved: the next resumes
        result = RunResult(run.variant, run.seed, run.run_dir, "failed", "interrupted")
    finally:
        _Worker.busy = False
        if os.getppid() != _Worker.parent:
            os._exit(143)  # an orphan: nobody is left to take the result or give more work
    _Worker.news.put((str(run.run_dir), True, f"{name}: {result.status}"))
    return result
