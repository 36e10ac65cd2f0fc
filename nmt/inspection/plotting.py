"""Matplotlib without a display, and figures (PNG, or PDF and SVG for papers)
written atomically."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from nmt.errors import NmtError
from nmt.io.files import atomic_write

FORMATS = ("png", "pdf", "svg")  # chosen by the file's suffix


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed), imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_format(path: Path) -> str:
    """The format ``path``'s suffix names; anything else is a user error, found
    before the work of drawing."""
    suffix = path.suffix.lower().removeprefix(".")
    if suffix not in FORMATS:
        raise NmtError(f"{path}: a figure is written as {', '.join('.' + f for f in FORMATS)}")
    return suffix


def save_figure(fig: Any, path: Path, dpi: int = 120) -> None:
    """Render ``fig`` in memory in the format of ``path``'s suffix, then write it
    atomically, then close it."""
    buf = io.BytesIO()
    if fig.get_layout_engine() is None:  # a figure laid out its own way keeps it
        fig.tight_layout()
    fig.savefig(buf, format=figure_format(path), dpi=dpi)
    pyplot().close(fig)
    atomic_write(path, lambda f: f.write(buf.getvalue()))
