"""Progress bars with a rate and an ETA, and messages, on stderr; ``--quiet`` (or
``NMT_QUIET=1``, or true/yes/on, which it sets so that subprocesses inherit it)
silences all but warnings and errors."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from nmt.env import flag

QUIET = "NMT_QUIET"
console = Console(stderr=True, highlight=False, quiet=flag(QUIET))


def set_quiet() -> None:
    """No progress bars or messages from here on, in this process and its children."""
    console.quiet = True
    os.environ[QUIET] = "1"


def info(message: str) -> None:
    """A message on stderr, taken literally (no markup); silent under ``--quiet``."""
    console.print(message, markup=False)


def warn(message: str) -> None:
    """A warning on stderr, shown even under ``--quiet``."""
    sys.stderr.write(f"warning: {message}\n")
    sys.stderr.flush()


class RateColumn(ProgressColumn):
    """The task's ``rate`` field and ``unit``: whole numbers, with one decimal below
    10 (a study's updates/s on a CPU, a beam of 1,024's sentences/s)."""

    def render(self, task: Task) -> Text:
        rate = task.fields["rate"]
        return Text(f"{rate:>8,.{1 if rate < 10 else 0}f} {task.fields['unit']}")


def progress_bar(*, disable: bool = False) -> Progress:
    """Bars showing ``completed/total``, a rate, elapsed time and ETA.

    Each task carries the fields ``rate`` and ``unit`` (tokens/s for training,
    sentences/s for translation, one bar may hold both) and a free ``info``;
    callers update the rate themselves, or through :func:`advancer`.
    """
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        disable=disable,
        transient=False,
    )


def advancer(bar: Progress, task: TaskID) -> Callable[[int], None]:
    """A callback that advances ``task`` by n units and sets its rate (units per
    second since the callback was made)."""
    start, done = time.perf_counter(), 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        bar.update(task, completed=done, rate=done / max(time.perf_counter() - start, 1e-9))

    return advance


@contextmanager
def sentence_progress(description: str, total: int, show: bool) -> Iterator[Callable[[int], None]]:
    """A bar over ``total`` sentences while the block runs; yields its ``advance(n)``."""
    bar = progress_bar(disable=not show)
    task = bar.add_task(description, total=total, rate=0.0, unit="sent/s", info="")
    with bar:
        yield advancer(bar, task)
