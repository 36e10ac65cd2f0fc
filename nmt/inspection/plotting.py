"""Matplotlib without a display, fonts for the scripts a corpus is written in, and
figures (PNG, or PDF and SVG for papers) written atomically."""

from __future__ import annotations

import functools
import io
import re
import warnings
from pathlib import Path
from typing import Any

from nmt.errors import NmtError
from nmt.io.files import atomic_write
from nmt.progress import warn

FORMATS = ("png", "pdf", "svg")  # chosen by the file's suffix

# Families that draw what matplotlib's DejaVu Sans cannot (Chinese, Japanese and
# Korean above all, then Indic and Thai scripts), in the order they are tried after
# it; those installed join the font list, so that a heatmap of a zh source shows
# its characters rather than boxes.
FALLBACK_FONTS = (
    "Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans CJK KR", "Source Han Sans SC",
    "WenQuanYi Micro Hei", "WenQuanYi Zen Hei", "Droid Sans Fallback", "AR PL UMing CN",
    "Noto Sans", "Noto Sans Devanagari", "Noto Sans Thai", "Lohit Devanagari",
)  # fmt: skip

# matplotlib's warning for a character no font in the list has
MISSING_GLYPH = re.compile(r"Glyph (\d+) .*missing from font")


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed), imported on first use,
    with DejaVu Sans and then every installed family of ``FALLBACK_FONTS`` (set on each
    call: whatever restored matplotlib's defaults in between is undone)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["font.family"] = ["DejaVu Sans", *fallback_fonts()]
    return plt


@functools.cache
def fallback_fonts() -> tuple[str, ...]:
    """The installed families of ``FALLBACK_FONTS``, looked up once per process."""
    return tuple(installed_fonts(FALLBACK_FONTS))


def installed_fonts(families: tuple[str, ...]) -> list[str]:
    """The ``families`` installed on this machine, in order. matplotlib lists the
    system's fonts once, in a cache it does not renew: a font installed after that
    (``apt install fonts-noto-cjk``) is added here from the system's font files."""
    from matplotlib import font_manager

    manager = font_manager.fontManager
    listed = {f.fname for f in manager.ttflist}
    for path in font_manager.findSystemFonts():
        if path not in listed:
            try:
                manager.addfont(path)
            except (OSError, RuntimeError, ValueError):  # a file FreeType cannot read
                continue
    names = {f.name for f in manager.ttflist}
    return [family for family in families if family in names]


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
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if fig.get_layout_engine() is None:  # a figure laid out its own way keeps it
            fig.tight_layout()
        fig.savefig(buf, format=figure_format(path), dpi=dpi)
    pyplot().close(fig)
    atomic_write(path, lambda f: f.write(buf.getvalue()))
    missing = []
    for w in caught:
        glyph = MISSING_GLYPH.search(str(w.message))
        if glyph is None:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        elif chr(int(glyph[1])) not in missing:
            missing.append(chr(int(glyph[1])))
    if missing:
        some = ", ".join(f"U+{ord(c):04X} {c}" for c in missing[:3])
        warn(
            f"{path}: {len(missing)} character(s) have no glyph in the installed fonts and "
            f"show as boxes ({some}); a font that has them draws them (docs/compare.md, "
            "Figures)"
        )
