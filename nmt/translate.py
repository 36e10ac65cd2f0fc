"""``nmt translate``: files or stdin in, exactly one output line per input line."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from nmt.alignment import Alignment, format_pharaoh
from nmt.attention_maps import each_attention_map, save_npz, supervised_heads, word_alignment
from nmt.checkpoint import write_text
from nmt.data.corpus import read_input
from nmt.decoding import Sampling, Translation, encode_source, translate_lines
from nmt.device import resolve_device
from nmt.errors import ConfigError, NmtError
from nmt.model import Transformer
from nmt.model.ensemble import Ensemble
from nmt.model.load import Loaded, load_model
from nmt.progress import console, sentence_progress, warn


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


def ensemble(members: list[Loaded], paths: list[Path]) -> Transformer | Ensemble:
    """One model, or the ensemble of several that share both vocabularies."""
    for path, member in zip(paths[1:], members[1:]):
        for side in ("src", "tgt"):
            if getattr(member.vocabs, side).model != getattr(members[0].vocabs, side).model:
                raise NmtError(
                    f"{path}: its {side} vocabulary differs from {paths[0]}'s; "
                    "ensemble members must share their vocabularies"
                )
    if len(members) == 1:
        return members[0].model
    return Ensemble([m.model for m in members])


def translate_file(
    checkpoints: list[Path],
    input: Path | None,
    output: Path | None,
    *,
    beam: int | None = None,
    n_best: int | None = None,
    alpha: float | None = None,
    batch_tokens: int | None = None,
    device: str = "auto",
    attention_dir: Path | None = None,
    alignments: Path | None = None,
    sampling: Sampling | None = None,
) -> None:
    if sampling is not None and (n_best is not None or (beam or 1) > 1):
        option = "--n-best" if n_best is not None else "--beam"
        raise NmtError(f"{option}: --sample draws one output per line; it takes no {option}")
    if len(checkpoints) > 1 and (attention_dir is not None or alignments is not None):
        option = "--attention-dir" if attention_dir is not None else "--alignments"
        raise NmtError(f"{option}: an ensemble has no single attention; give one model")
    dev = resolve_device(device)
    members = [load_model(path, dev) for path in checkpoints]
    loaded, model = members[0], ensemble(members, checkpoints)
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
    # Stdin typed at a terminal gets no bar; a file or a pipe into a file does.
    show = console.is_terminal and (input is not None or not sys.stdout.isatty())
    with sentence_progress("translate", len(lines), show) as advance:
        nbest = translate_lines(
            model,
            loaded.vocabs.src,
            loaded.vocabs.tgt,
            lines,
            cfg,
            dev,
            on_batch=advance,
            warn=warn,
            sampling=sampling,
        )
    if attention_dir is not None or alignments is not None:
        links = attention_outputs(loaded, lines, [h[0].tokens for h in nbest], attention_dir)
        if alignments is not None:
            write_output(alignments, "".join(format_pharaoh(a) + "\n" for a in links))
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


def attention_outputs(
    loaded: Loaded, lines: list[str], hyps: list[list[int]], out_dir: Path | None
) -> list[Alignment]:
    """Each line's word alignment (source word i - output word j, from the 1-best's
    cross-attention, as ``compare`` extracts it for AER; empty for an empty line);
    with ``out_dir``, also ``DIR/{line}.npz`` (0-based input line) with every layer's
    cross-attention (empty lines have no file)."""
    src = encode_source(loaded.vocabs.src, lines, loaded.model.cfg.max_positions - 1)
    todo = [i for i, s in enumerate(src) if s]
    v = loaded.vocabs
    links: list[Alignment] = [set() for _ in lines]
    for i, amap in each_attention_map(loaded.model, v.src, v.tgt, src, hyps, todo):
        if out_dir is not None:
            save_npz(out_dir / f"{i}.npz", amap)
        links[i] = word_alignment(amap, supervised_heads(loaded.cfg))
    return links
