"""``nmt translate``: files or stdin in, exactly one output line per input line."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import torch

from nmt.data.alignment import Alignment, format_pharaoh
from nmt.data.corpus import input_chunks, n_lines, read_lines
from nmt.decoding.length_check import check_lengths
from nmt.decoding.search import Sampling, Translation, encode_source
from nmt.decoding.split import translate_text
from nmt.errors import ConfigError, NmtError
from nmt.io.files import atomic_file
from nmt.model.ensemble import Ensemble
from nmt.model.load import Loaded, load_model
from nmt.model.seq2seq import Transformer
from nmt.progress import console, sentence_progress, warn
from nmt.setup.decoding import LengthMode, with_overrides
from nmt.setup.device import resolve_device

# Lines translated at a time: memory stays bounded on a corpus of millions (back-
# translation), while the sort by length within a chunk keeps batches as tight.
CHUNK_LINES = 10_000


def one_line(text: str) -> str:
    """Hypotheses never contain a line break, whatever the input held."""
    return " ".join(text.splitlines())


def format_output(nbest: list[list[Translation]], n_best: int | None, first: int = 0) -> str:
    """The 1-best lines, or with ``n_best`` 'i ||| hyp ||| score' lines, where i counts
    input lines from ``first`` (the chunk's first line in the whole input)."""
    if n_best is None:
        return "".join(one_line(hyps[0].text) + "\n" for hyps in nbest)
    return "".join(
        f"{i} ||| {one_line(h.text)} ||| {h.score:.4f}\n"
        for i, hyps in enumerate(nbest, first)
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


def same_file(a: Path | None, b: Path | None) -> bool:
    """Whether two path options name one file (through links too); ``-`` and an
    absent option name none."""
    named = [p for p in (a, b) if p is not None and str(p) != "-"]
    return len(named) == 2 and named[0].resolve() == named[1].resolve()


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
    overrides: list[str] | None = None,
    length: LengthMode = "model",
    ref: Path | None = None,
    report: Path | None = None,
) -> None:
    """Translate ``input`` (a file, or stdin) into ``output``, one line per line, with
    the run's decode settings changed by the options (``overrides``:
    ``decode.KEY=VALUE``, ``decode.split`` among them); ``length`` oracle makes each
    output exactly as long as its line of ``ref``, in pieces. Then the lines whose
    output is far shorter than the run predicts are named on stderr (and every
    line's lengths written to ``report``, JSON lines)."""
    if (length == "oracle") != (ref is not None):
        raise NmtError(
            "--length oracle needs --ref, the references whose lengths it keeps"
            if ref is None
            else "--ref: only --length oracle uses it"
        )
    refs = read_lines(ref) if ref is not None else None
    if sampling is not None and (n_best is not None or (beam or 1) > 1):
        option = "--n-best" if n_best is not None else "--beam"
        raise NmtError(f"{option}: --sample draws one output per line; it takes no {option}")
    if same_file(output, input):
        raise NmtError(
            f"-o {output}: the same file as -i; the translation would replace the source"
        )
    for other, option in ((output, "-o"), (input, "-i")):
        if same_file(alignments, other):
            raise NmtError(f"--alignments {alignments}: the same file as {option}")
        if same_file(report, other):
            raise NmtError(f"--report {report}: the same file as {option}")
    if attention_dir is not None and attention_dir.exists() and not attention_dir.is_dir():
        raise NmtError(f"--attention-dir {attention_dir}: a file, not a directory")
    if len(checkpoints) > 1 and (attention_dir is not None or alignments is not None):
        option = "--attention-dir" if attention_dir is not None else "--alignments"
        raise NmtError(f"{option}: an ensemble has no single attention; give one model")
    dev = resolve_device(device)
    members = [load_model(path, dev) for path in checkpoints]
    loaded, model = members[0], ensemble(members, checkpoints)
    cfg = with_overrides(loaded.cfg.decode, overrides or [])
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
    except ConfigError as e:  # DecodeConfig's checks, named by the option that sets the key
        raise NmtError(f"--{e.key.replace('_', '-')}: {e.message}") from None
    if cfg.split == "sentences" and (attention_dir is not None or alignments is not None):
        option = "--attention-dir" if attention_dir is not None else "--alignments"
        raise NmtError(f"{option}: a line cut into sentences has no attention of its own")
    if beam > len(loaded.vocabs.tgt):
        raise NmtError(
            f"--beam {beam}: more than the {len(loaded.vocabs.tgt)} pieces of the target vocabulary"
        )
    typed = (input is None or str(input) == "-") and sys.stdin.isatty() and refs is None
    total, chunks = (0, iter(())) if typed else input_chunks(input, CHUNK_LINES)
    if refs is not None and len(refs) != total:  # before any work or output
        few = "fewer than" if len(refs) < total else "more than"
        raise NmtError(f"--ref {ref}: {n_lines(len(refs))}, {few} the input's {total:,}")
    # Stdin typed at a terminal gets no bar; a file or a pipe into a file does.
    show = console.is_terminal and (input is not None or not sys.stdout.isatty())
    generator = None if sampling is None else torch.Generator(dev).manual_seed(sampling.seed)
    truncated = 0
    lengths: list[tuple[int, int]] = []  # (source pieces, output pieces) of every line

    def count_truncated(n: int) -> None:
        nonlocal truncated
        truncated += n

    with (
        ExitStack() as outputs,
        sentence_progress("translate", total, show and not typed) as advance,
    ):
        write = outputs.enter_context(open_output(output))
        write_links = None if alignments is None else outputs.enter_context(open_output(alignments))

        def translate_part(lines: list[str], first: int) -> None:
            nbest = translate_text(
                loaded,
                model,
                lines,
                cfg,
                dev,
                advance,
                on_truncated=count_truncated,
                sampling=sampling,
                generator=generator,
                refs=None if refs is None else refs[first : first + len(lines)],
            )
            sources = encode_source(loaded.vocabs.src, lines, loaded.model.cfg.max_positions - 1)
            lengths.extend((len(s), len(h[0].tokens)) for s, h in zip(sources, nbest))
            if attention_dir is not None or write_links is not None:
                best = [h[0].tokens for h in nbest]
                links = attention_outputs(loaded, lines, best, attention_dir, first)
                if write_links is not None:
                    write_links("".join(format_pharaoh(a) + "\n" for a in links))
            write(format_output(nbest, n_best, first))

        first = 0
        for lines in typed_lines() if typed else chunks:
            translate_part(lines, first)
            first += len(lines)
    if truncated:
        limit = loaded.model.cfg.max_positions - 1
        warn(f"{truncated} input line(s) longer than {limit} pieces were truncated")
    check_lengths(lengths, cfg, report)


def typed_lines() -> Iterator[list[str]]:
    """Sentences typed at a terminal, one at a time, each after a prompt on stderr,
    until Ctrl-D: each is translated as soon as Enter is pressed."""
    sys.stderr.write("type a sentence, then Enter; Ctrl-D to end\n")
    while True:
        sys.stderr.write("> ")
        sys.stderr.flush()
        try:
            line = sys.stdin.readline()
        except UnicodeDecodeError:
            sys.stderr.write("not UTF-8 text: type it again\n")
            continue
        if not line:
            sys.stderr.write("\n")
            return
        yield [line.rstrip("\r\n")]


@contextmanager
def open_output(output: Path | None) -> Iterator[Callable[[str], None]]:
    """A ``write(text)`` into ``output`` for the block. Stdout (None or ``-``) gets
    each text as it comes; a file goes through :func:`atomic_file` (replaced when
    the block ends, left as it was if it fails; a device or FIFO written in place)."""
    if output is None or str(output) == "-":

        def write(text: str) -> None:
            sys.stdout.write(text)
            sys.stdout.flush()

        yield write
        return
    with atomic_file(output) as f:
        yield lambda text: f.write(text.encode("utf-8"))


def attention_outputs(
    loaded: Loaded, lines: list[str], hyps: list[list[int]], out_dir: Path | None, first: int = 0
) -> list[Alignment]:
    """Each line's word alignment (source word i - output word j, from the 1-best's
    cross-attention, as ``compare`` extracts it for AER; empty for an empty line);
    with ``out_dir``, also ``DIR/{line}.npz`` (0-based line of the whole input, whose
    line ``first`` is ``lines[0]``) with every layer's cross-attention (empty lines
    have no file). Inspection is imported here, where it is asked for: training's
    final test translation loads none of it."""
    from nmt.inspection.maps import each_attention_map, save_npz, supervised_heads, word_alignment

    src = encode_source(loaded.vocabs.src, lines, loaded.model.cfg.max_positions - 1)
    todo = [i for i, s in enumerate(src) if s]
    v = loaded.vocabs
    links: list[Alignment] = [set() for _ in lines]
    for i, amap in each_attention_map(loaded.model, v.src, v.tgt, src, hyps, todo):
        if out_dir is not None:
            save_npz(out_dir / f"{first + i}.npz", amap)
        links[i] = word_alignment(amap, supervised_heads(loaded.cfg))
    return links
