"""``nmt translate``: files or stdin in, exactly one output line per input line."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

from nmt.attention_maps import each_attention_map, save_npz
from nmt.checkpoint import write_text
from nmt.data.corpus import read_input
from nmt.decoding import Sampling, Translation, encode_source, translate_lines
from nmt.device import resolve_device
from nmt.errors import ConfigError, NmtError
from nmt.model.load import Loaded, load_model
from nmt.progress import console, progress_bar


def one_line(text: str) -> str:
    """Hypotheses never contain a line break, whatever the input held."""
    return " ".join(text.splitlines())


def format_output(nbest: list[list[Translation]], n_best: int | None) -> str:
    if n_best is None:
        return "".join(one_line(hyps[0].text) + "\n" for hyps in nbest)
    return "".join(
        f"{i} ||| {one_line(h.text)} ||| {h.score:.4f}\n"
        for i, hyps in enumerate(nbest)
        for h in hyps
    )


def sampling_options(
    sample: bool,
    temperature: float | None,
    top_k: int | None,
    top_p: float | None,
    seed: int | None,
) -> Sampling | None:
    """``--sample`` and its options as a :class:`Sampling` (None: search); an option
    given without ``--sample`` is refused, as it would do nothing."""
    given = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "seed": seed}
    given = {k: v for k, v in given.items() if v is not None}
    if not sample:
        if given:
            option = "--" + next(iter(given)).replace("_", "-")
            raise NmtError(f"{option}: only --sample uses it")
        return None
    try:
        return Sampling(**given)
    except ConfigError as e:
        raise NmtError(f"--{e.key.replace('_', '-')}: {e.message}") from None


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
    attention_dir: Path | None = None,
    sampling: Sampling | None = None,
) -> None:
    if sampling is not None and (n_best is not None or (beam or 1) > 1):
        option = "--n-best" if n_best is not None else "--beam"
        raise NmtError(f"{option}: --sample draws one output per line; it takes no {option}")
    dev = resolve_device(device)
    loaded = load_model(checkpoint, dev)
    cfg = loaded.cfg.decode
    if sampling is not None:
        beam = 1
    elif beam is None:
        beam = max(cfg.beam, n_best or 1)
    changes = {"beam": beam, "n_best": n_best if n_best is not None else 1}
    if alpha is not None:
        changes["alpha"] = alpha
    if batch_tokens is not None:
        changes["batch_tokens"] = batch_tokens
    try:
        cfg = dataclasses.replace(cfg, **changes)
    except NmtError as e:  # ConfigError from DecodeConfig's checks
        raise NmtError(f"--beam/--n-best/--batch-tokens: {e}") from None
    if beam > len(loaded.vocabs.tgt):
        raise NmtError(
            f"--beam {beam}: more than the {len(loaded.vocabs.tgt)} pieces of the target vocabulary"
        )
    lines = read_input(input)
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
            sampling=sampling,
        )
    if attention_dir is not None:
        save_attention(loaded, lines, [hyps[0].tokens for hyps in nbest], attention_dir)
    write_output(output, format_output(nbest, n_best))


def write_output(output: Path | None, text: str) -> None:
    """Stdout (None or ``-``); a regular file or a new path is replaced atomically, a
    symlink's target likewise; a FIFO or a device (``/dev/null``, a terminal) is
    written to directly, never replaced by a regular file."""
    if output is None or str(output) == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = output.resolve() if output.is_symlink() else output
    if target.exists() and not target.is_file() and not target.is_dir():
        try:
            with open(target, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            raise NmtError(f"{output}: cannot write ({e.strerror or e})") from None
        return
    if target.is_dir():
        raise NmtError(f"{output}: is a directory")
    write_text(target, text)


def save_attention(loaded: Loaded, lines: list[str], hyps: list[list[int]], out_dir: Path) -> None:
    """``DIR/{line}.npz`` (0-based input line) with every layer's cross-attention for the
    1-best translation; empty input lines have no file."""
    src = encode_source(loaded.vocabs.src, lines, loaded.model.cfg.max_positions - 1)
    todo = [i for i, s in enumerate(src) if s]
    v = loaded.vocabs
    for i, amap in each_attention_map(loaded.model, v.src, v.tgt, src, hyps, todo):
        save_npz(out_dir / f"{i}.npz", amap)
