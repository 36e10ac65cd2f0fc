"""After ``nmt translate``: the lines whose output is far shorter than the run's own
length statistics predict, named on stderr, with what to do about them.

A model trained on single sentences stops after about one sentence of a line that
holds several (docs/results.md, "Long inputs"): such an output is short for its
source, and nothing else says so. The prediction is ``decode.length_ratio`` (the
training pairs' mean target/source pieces, measured when the run was built) times
the line's source pieces; a line is named when its output has fewer pieces than
``decode.short`` (0.5) of that. ``--report FILE`` writes every line's figures as
JSON lines, for a script to act on.
"""

from __future__ import annotations

import json
from pathlib import Path

from nmt.io.files import write_text
from nmt.progress import warn
from nmt.setup.decoding import DecodeConfig

SHOWN = 10  # line numbers named in the warning; --report has every one


def predicted(cfg: DecodeConfig, source_pieces: int) -> float | None:
    """The output length the run predicts for a source of ``source_pieces``."""
    return None if cfg.length_ratio is None else cfg.length_ratio * source_pieces


def is_short(cfg: DecodeConfig, source_pieces: int, output_pieces: int) -> bool:
    expected = predicted(cfg, source_pieces)
    return expected is not None and cfg.short > 0 and output_pieces < cfg.short * expected


def check_lengths(lengths: list[tuple[int, int]], cfg: DecodeConfig, report: Path | None) -> None:
    """``lengths``: (source pieces, output pieces) of every line, in input order. Warn
    about the short ones; write ``report`` (one JSON object per line)."""
    short = [i for i, (s, o) in enumerate(lengths, 1) if is_short(cfg, s, o)]
    if report is not None:
        rows = (
            {
                "line": i,
                "source_pieces": s,
                "output_pieces": o,
                "predicted": None if (p := predicted(cfg, s)) is None else round(p, 1),
                "short": is_short(cfg, s, o),
            }
            for i, (s, o) in enumerate(lengths, 1)
        )
        write_text(report, "".join(json.dumps(r) + "\n" for r in rows))
    if not short:
        return
    named = ", ".join(map(str, short[:SHOWN]))
    more = f" and {len(short) - SHOWN:,} more" if len(short) > SHOWN else ""
    remedy = (
        "train with data.join (docs/training.md)"
        if cfg.split == "sentences"
        else "translate with --split sentences, or train with data.join (docs/training.md)"
    )
    warn(
        f"{len(short):,} of {len(lengths):,} output lines have under {cfg.short:g} of the "
        f"length this run predicts for their source (line {named}{more}): content may "
        f"be missing, as where a model trained on single sentences stops early on a "
        f"line of several; {remedy}"
        + ("" if report is not None else "; --report FILE lists every line")
    )
