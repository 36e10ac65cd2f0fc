"""Progress bars with a rate and an ETA, and messages, on stderr; ``--quiet`` (or
``NMT_QUIET=1``, or true/yes/on, which it sets so that subprocesses inherit it)
silences all but warnings and errors.

Where stderr is no terminal (a SLURM job's log, ``nohup``, CI, ``2> log``) a bar
would draw nothing: long work prints plain lines instead (:func:`log_line`),
each with what it has done, its rate, the time elapsed and an ETA."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off", "")


def flag(name: str) -> bool:
    """Whether the switch ``name`` is on; unset is off. A value that is neither true
    nor false is off, with a warning naming it (an import-time switch cannot stop
    the program with a clean error)."""
    value = os.environ.get(name, "").strip().lower()
    if value in TRUE:
        return True
    if value not in FALSE:
        sys.stderr.write(
            f"warning: {name}={os.environ[name]!r} is not a switch value "
            f"(true: {', '.join(TRUE)}; false: {', '.join(v for v in FALSE if v)}); "
            "taken as off\n"
        )
    return False


QUIET = "NMT_QUIET"
# soft_wrap: a message is one line, however long (rich would cut it at 80 columns
# where stderr is no terminal, and grep would miss it); tables keep their layout
console = Console(stderr=True, highlight=False, quiet=flag(QUIET), soft_wrap=True)


def set_quiet() -> None:
    """No progress bars or messages from here on, in this process and its children."""
    console.quiet = True
    os.environ[QUIET] = "1"


def info(message: str) -> None:
    """A message on stderr, taken literally (no markup); silent under ``--quiet``."""
    console.print(message, markup=False)


def log_line(message: str) -> None:
    """A line for a log: printed where stderr is no terminal (where a bar shows the
    same on a terminal), silent under ``--quiet``."""
    if not console.is_terminal:
        info(message)


def clock(seconds: float) -> str:
    """Seconds as H:MM:SS."""
    seconds = max(int(seconds), 0)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def eta(done: float, total: float | None, elapsed: float) -> str:
    """The time left at the pace so far, as H:MM:SS ("?" while it cannot be known)."""
    if not total or done <= 0:
        return "?"
    return clock((total - done) * elapsed / done)


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: ``3 runs``, ``1 decoder layer``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


class LogLines:
    """Long work's plain lines for a log (:func:`log_line`: none on a terminal, where a
    bar shows the same): at most one line every ``every`` seconds with what is done
    (``unit``: what is counted, one of them: ``sentence``), the rate (in ``rate_unit``,
    by default ``units/s``), the time elapsed and an ETA, and one when it ends."""

    def __init__(
        self,
        description: str,
        unit: str,
        total: int | None,
        every: float = 60.0,
        rate_unit: str | None = None,
    ):
        self.description, self.unit, self.total, self.every = description, unit, total, every
        self.rate_unit = rate_unit or f"{unit}s/s"
        self.start = self.last = time.perf_counter()

    def update(self, done: int, share: float | None = None) -> None:
        """``done`` so far; ``share``: the share of the work done, where the ETA
        should follow it rather than ``done`` (:class:`Tally`)."""
        now = time.perf_counter()
        if now - self.last < self.every:
            return
        self.last, elapsed = now, now - self.start
        total = "?" if self.total is None else f"{self.total:,}"
        left = eta(done, self.total, elapsed) if share is None else eta(share, 1.0, elapsed)
        log_line(
            f"{self.description}: {done:,}/{total} {self.unit}s, "
            f"{done / max(elapsed, 1e-9):,.1f} {self.rate_unit}, elapsed "
            f"{clock(elapsed)}, ETA {left}"
        )

    def end(self, done: int) -> None:
        elapsed = time.perf_counter() - self.start
        log_line(
            f"{self.description}: {counted(done, self.unit)} in {clock(elapsed)} "
            f"({done / max(elapsed, 1e-9):,.1f} {self.rate_unit})"
        )


def warn(message: str) -> None:
    """A warning on stderr, shown even under ``--quiet``."""
    sys.stderr.write(f"warning: {message}\n")
    sys.stderr.flush()


class CountColumn(ProgressColumn):
    """``done/total``: the task's ``count`` field where it has one (a translation's
    sentences, while its fill follows the work: :class:`Tally`), else what is
    completed."""

    def render(self, task: Task) -> Text:
        done = int(task.fields.get("count", task.completed))
        total = "?" if task.total is None else f"{int(task.total):,}"
        return Text(f"{done:,}/{total}", style="progress.download")


class RateColumn(ProgressColumn):
    """The task's ``rate`` field and ``unit``: whole numbers, with one decimal below
    10 (a study's updates/s on a CPU, a beam of 1,024's sentences/s)."""

    def render(self, task: Task) -> Text:
        rate = task.fields["rate"]
        return Text(f"{rate:>8,.{1 if rate < 10 else 0}f} {task.fields['unit']}")


class EtaColumn(TimeRemainingColumn):
    """The task's ``eta`` field where its owner reckons the time left better than its
    fill's pace can (a study, whose runs test after their last update), else rich's
    time remaining."""

    def render(self, task: Task) -> Text:
        if task.fields.get("eta"):
            return Text(task.fields["eta"], style="progress.remaining")
        return super().render(task)


def progress_bar(*, disable: bool = False) -> Progress:
    """Bars showing ``completed/total``, a rate, elapsed time and ETA.

    Each task carries the fields ``rate`` and ``unit`` (tokens/s for training,
    sentences/s for translation, one bar may hold both) and a free ``info``;
    callers update the rate themselves, or through a :class:`Tally`. Never drawn
    where stderr is no terminal: rich's last render of a bar would stay in a log as a
    line cut at 80 columns, and :func:`log_line` and :class:`LogLines` say the same
    there in plain lines.
    """
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        CountColumn(),
        RateColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        EtaColumn(),
        console=console,
        disable=disable or not console.is_terminal,
        transient=False,
    )


class Tally:
    """Sentences done (what a user reads: ``250/1,000``) and the work behind them, from
    which ``task``'s fill and rate and the ETA come, on the bar and in ``lines`` (a
    log's).

    The work is what a translation call plans (:meth:`planned`: source pieces). Its
    batches hold about as many pieces whatever their sentences' length, and it goes
    from the shortest sentences to the longest: an ETA that counted sentences came
    early, one that counts pieces less so (docs/commands.md). Work not planned yet
    (the parts of a long input not read yet) is taken at the work per sentence
    planned so far; where nothing plans any (an import), the work is the sentences."""

    def __init__(
        self, bar: Progress, task: TaskID, total: int, lines: LogLines | None = None
    ) -> None:
        self.bar, self.task, self.total, self.lines = bar, task, total, lines  # total: sentences
        self.start = time.perf_counter()
        self.sentences = self.work = self.planned_sentences = self.planned_work = 0

    def planned(self, sentences: int, work: int) -> None:
        """A translation call's ``sentences`` and their ``work``, before it starts."""
        self.planned_sentences += sentences
        self.planned_work += work

    def done(self, sentences: int, work: int = 0) -> None:
        """``sentences`` more done, and their ``work`` (of what was planned)."""
        self.sentences += sentences
        self.work += work
        rate = self.sentences / max(time.perf_counter() - self.start, 1e-9)
        share = self.share()
        # the fill follows the work (in sentences' worth), the count the sentences
        completed = self.sentences if share is None else share * self.total
        self.bar.update(self.task, completed=completed, count=self.sentences, rate=rate)
        if self.lines is not None:
            self.lines.update(self.sentences, share)

    def share(self) -> float | None:
        """The share of the whole work done; None where nothing was planned."""
        if not self.planned_sentences:
            return None
        per_sentence = self.planned_work / self.planned_sentences
        unplanned = max(self.total - self.planned_sentences, 0) * per_sentence
        whole = self.planned_work + unplanned
        return min(self.work / whole, 1.0) if whole else None


@contextmanager
def sentence_progress(description: str, total: int, show: bool) -> Iterator[Tally]:
    """A bar over ``total`` sentences while the block runs (or, in a log, a line as it
    starts, one a minute at most with the rate and an ETA, and one as it ends); yields
    its :class:`Tally`."""
    bar = progress_bar(disable=not show)
    task = bar.add_task(description, total=total, rate=0.0, unit="sent/s", info="")
    log_line(f"{description}: {counted(total, 'sentence')}")
    lines = LogLines(description, "sentence", total, rate_unit="sent/s")
    with bar:
        yield Tally(bar, task, total, lines)
    lines.end(total)
