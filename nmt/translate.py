"""``nmt translate``: files or stdin in, exactly one output line per input line."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

from nmt.checkpoint import write_text
from nmt.data.corpus import decode_lines, read_lines
from nmt.decoding import translate_lines
from nmt.errors import NmtError
from nmt.model.load import load_model
from nmt.progress import console, progress_bar
from nmt.training.trainer import resolve_device


def _one_line(text: str) -> str:
    """Hypotheses never contain a line break, whatever the input held."""
    return " ".join(text.splitlines())


def format_output(nbest: list[list[tuple[str, float]]], n_best: int | None) -> str:
    if n_best is None:
        return "".join(_one_line(hyps[0][0]) + "\n" for hyps in nbest)
    return "".join(
        f"{i} ||| {_one_line(h)} ||| {s:.4f}\n" for i, hyps in enumerate(nbest) for h, s in hyps
    )


def translate_file(
    checkpoint: Path,
    input: Path | None,
    output: Path | None,
    *,
    beam: int | None = None,
    n_best: int | None = None,
    alpha: float | None = None,
    batch_tokens: int | None = None,
    device: str = "auto",
) -> None:
    dev = resolve_device(device)
    loaded = load_model(checkpoint, dev)
    cfg = loaded.cfg.decode
    beam = beam if beam is not None else max(cfg.beam, n_best or 1)
    changes = {"beam": beam, "n_best": n_best or 1}
    if alpha is not None:
        changes["alpha"] = alpha
    if batch_tokens is not None:
        changes["batch_tokens"] = batch_tokens
    try:
        cfg = dataclasses.replace(cfg, **changes)
    except NmtError as e:  # ConfigError from DecodeConfig's checks
        raise NmtError(f"--beam/--n-best/--batch-tokens: {e}") from None
    lines = (
        read_lines(input) if input is not None else decode_lines(sys.stdin.buffer.read(), "<stdin>")
    )
    show = input is not None and console.is_terminal
    bar = progress_bar("sent/s", disable=not show)
    task = bar.add_task("translate", total=len(lines), rate=0.0, info="")
    start = time.perf_counter()

    def advance(n: int) -> None:
        done = bar.tasks[0].completed + n
        bar.update(task, completed=done, rate=done / max(time.perf_counter() - start, 1e-9))

    with bar:
        nbest = translate_lines(
            loaded.model,
            loaded.vocabs.src,
            loaded.vocabs.tgt,
            lines,
            cfg,
            dev,
            on_batch=advance,
            warn=lambda m: console.print(f"warning: {m}"),
        )
    text = format_output(nbest, n_best)
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_text(output, text)
