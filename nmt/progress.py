"""Progress bars with a rate and an ETA, on stderr."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True, highlight=False)


def progress_bar(rate_unit: str, *, disable: bool = False) -> Progress:
    """A bar showing ``completed/total``, a ``rate`` field in ``rate_unit``, elapsed and ETA.

    Callers update the ``rate`` field themselves (tokens/s for training,
    sentences/s for translation) and may add a free ``info`` field.
    """
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]:>8,.0f} " + rate_unit),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        disable=disable,
        transient=False,
    )
