"""Matplotlib without a display, and PNGs written atomically."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from nmt.checkpoint import atomic_write


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed), imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path, dpi: int = 120) -> None:
    """Render ``fig`` to PNG in memory, then write it atomically, then close it."""
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=dpi)
    pyplot().close(fig)
    atomic_write(path, lambda f: f.write(buf.getvalue()))
