"""``nmt translate``: files or stdin in, exactly one output line per input line."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from nmt.data.alignment import Alignment, format_pharaoh
from nmt.data.corpus import input_chunks, n_lines, read_lines
from nmt.decoding.length_check import check_lengths
from nmt.decoding.search import Listener, Options, Sampling, Translation, encode_source
from nmt.decoding.split import sentence_rules, translate_text
from nmt.errors import ConfigError, NmtError
from nmt.io.files import atomic_file
from nmt.model.ensemble import Ensemble
from nmt.model.load import Loaded, load_model
from nmt.model.seq2seq import Transformer
from nmt.progress import sentence_progress, warn
from nmt.setup.decoding import DecodeConfig, LengthMode, with_overrides
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
        if member.vocabs.src.separator != members[0].vocabs.src.separator:
            raise NmtError(
                f"{path}: one of it and {paths[0]} is a sentence-group model "
                "(model.decoder.group_layers) and the other not; their outputs do not "
                "combine"
            )
    if len(members) == 1:
        return members[0].model
    return Ensemble([m.model for m in members])


def same_file(a: Path | None, b: Path | None) -> bool:
    """Whether two path options name one file (through links too); ``-`` and an
    absent option name none."""
    named = [p for p in (a, b) if p is not None and str(p) != "-"]
    return len(named) == 2 and named[0].resolve() == named[1].resolve()


@dataclass(frozen=True)
class Files:
    """The files of one ``nmt translate``: ``None`` or ``-`` is stdin or stdout."""

    input: Path | None = None
    output: Path | None = None
    ref: Path | None = None  # --length oracle: the references whose lengths it keeps
    report: Path | None = None  # each line's source, output and predicted lengths
    alignments: Path | None = None  # word alignments from the attention (Pharaoh)
    attention_dir: Path | None = None  # each line's attention, DIR/LINE.npz

    def check(self, request: Request, members: int) -> None:
        """Refuse what cannot work before any model loads or any line is read."""
        if (request.length == "oracle") != (self.ref is not None):
            raise NmtError(
                "--length oracle needs --ref, the references whose lengths it keeps"
                if self.ref is None
                else "--ref: only --length oracle uses it"
            )
        if same_file(self.output, self.input):
            raise NmtError(
                f"-o {self.output}: the same file as -i; the translation would replace the source"
            )
        for other, option in ((self.output, "-o"), (self.input, "-i")):
            for path, name in ((self.alignments, "--alignments"), (self.report, "--report")):
                if same_file(path, other):
                    raise NmtError(f"{name} {path}: the same file as {option}")
        for path, option in (
            (self.output, "-o"),
            (self.report, "--report"),
            (self.alignments, "--alignments"),
        ):
            if path is not None and str(path) != "-" and path.is_dir():
                raise NmtError(f"{option} {path}: a directory, not a file")
        where = self.attention_dir
        if where is not None and where.exists() and not where.is_dir():
            raise NmtError(f"--attention-dir {where}: a file, not a directory")
        if (option := self.attention_option()) and members > 1:
            raise NmtError(f"{option}: an ensemble has no single attention; give one model")

    def attention_option(self) -> str | None:
        """The option that asks for each line's attention, if any."""
        if self.attention_dir is not None:
            return "--attention-dir"
        return "--alignments" if self.alignments is not None else None


@dataclass(frozen=True)
class Request:
    """How ``nmt translate`` was asked to decode, beyond the run's decode section:
    the options that set a decode key (named in their errors), other keys as
    ``decode.KEY=VALUE`` (``changes``), sampling and the length mode."""

    beam: int | None = None
    n_best: int | None = None  # n-best lists out, as 'i ||| hyp ||| score'
    alpha: float | None = None
    batch_tokens: int | None = None
    changes: tuple[str, ...] = ()
    sampling: Sampling | None = None
    length: LengthMode = "model"

    def decode(self, loaded: Loaded) -> DecodeConfig:
        """The run's decode section with this request applied."""
        if self.sampling is not None and (self.n_best is not None or (self.beam or 1) > 1):
            option = "--n-best" if self.n_best is not None else "--beam"
            raise NmtError(f"{option}: --sample draws one output per line; it takes no {option}")
        cfg = with_overrides(loaded.cfg.decode, list(self.changes))
        n_best = 1 if self.n_best is None else self.n_best
        beam = max(cfg.beam, n_best) if self.beam is None else self.beam
        beam = 1 if self.sampling is not None else beam
        options = {"beam": beam, "n_best": n_best, "alpha": self.alpha}
        options["batch_tokens"] = self.batch_tokens
        try:  # DecodeConfig's checks, named by the option that sets the key
            cfg = dataclasses.replace(cfg, **{k: v for k, v in options.items() if v is not None})
        except ConfigError as e:
            raise NmtError(f"--{e.key.replace('_', '-')}: {e.message}") from None
        if beam > len(loaded.vocabs.tgt):
            raise NmtError(
                f"--beam {beam}: more than the {len(loaded.vocabs.tgt)} pieces of the target "
                "vocabulary"
            )
        return cfg


def translate_file(
    checkpoints: list[Path], files: Files, request: Request, device: str = "auto"
) -> None:
    """Translate ``files.input`` (a file, or stdin) into ``files.output``, one line per
    line, as ``request`` asks (``decode.split`` among its changes; the oracle length
    from ``files.ref``); then name on stderr the lines whose output is far shorter
    than the run predicts (every line's lengths to ``files.report``)."""
    files.check(request, len(checkpoints))
    refs = read_lines(files.ref) if files.ref is not None else None
    dev = resolve_device(device)
    members = [load_model(path, dev) for path in checkpoints]
    loaded, model = members[0], ensemble(members, checkpoints)
    cfg = request.decode(loaded)
    if cfg.split != "none":  # refused before any output or progress line
        if option := files.attention_option():
            raise NmtError(f"{option}: a line split into sentences has no attention drawn yet")
        sentence_rules(loaded, cfg, oracle=files.ref is not None)
    typed = (files.input is None or str(files.input) == "-") and sys.stdin.isatty()
    typed = typed and refs is None
    total, chunks = (0, iter(())) if typed else input_chunks(files.input, CHUNK_LINES)
    if refs is not None and len(refs) != total:  # before any work or output
        few = "fewer than" if len(refs) < total else "more than"
        raise NmtError(f"--ref {files.ref}: {n_lines(len(refs))}, {few} the input's {total:,}")
    # Stdin typed at a terminal gets no bar; a file or a pipe into a file does (where
    # stderr is a terminal: nmt.progress.progress_bar).
    shown = files.input is not None or not sys.stdout.isatty()
    with ExitStack() as outputs:
        progress = outputs.enter_context(sentence_progress("translate", total, shown and not typed))
        run = Translating(loaded, model, cfg, dev, request, files, refs).open(outputs, progress)
        first = 0
        for lines in typed_lines() if typed else chunks:
            run.part(lines, first)
            first += len(lines)
    if run.truncated:
        limit = loaded.model.cfg.max_positions - 1
        warn(f"{run.truncated} input line(s) longer than {limit} pieces were truncated")
    check_lengths(run.lengths, cfg, files.report)


@dataclass
class Translating:
    """One ``nmt translate`` under way: the model and what it was asked, its outputs
    (opened by :meth:`open`), each part of the input translated and written in
    turn, and what it saw counted."""

    loaded: Loaded
    model: Transformer | Ensemble
    cfg: DecodeConfig
    device: torch.device
    request: Request
    files: Files
    refs: list[str] | None
    truncated: int = 0
    lengths: list[tuple[int, int]] = field(default_factory=list)  # (source, output) pieces

    def open(self, outputs: ExitStack, progress: Listener) -> Translating:
        """Open the output (and alignments) files in ``outputs``; progress to ``progress``."""
        self.write = outputs.enter_context(open_output(self.files.output))
        links = self.files.alignments
        self.write_links = None if links is None else outputs.enter_context(open_output(links))
        sampling = self.request.sampling
        generator = None
        if sampling is not None:
            generator = torch.Generator(self.device).manual_seed(sampling.seed)
        self.options = Options(
            progress=progress,
            on_truncated=self.count_truncated,
            sampling=sampling,
            generator=generator,
        )
        return self

    def count_truncated(self, n: int) -> None:
        self.truncated += n

    def part(self, lines: list[str], first: int) -> None:
        """Translate and write ``lines``, the input's from line ``first`` (0-based)."""
        refs = None if self.refs is None else self.refs[first : first + len(lines)]
        sources: list[int] = []  # each line's source pieces, as the model read them
        options = dataclasses.replace(self.options, refs=refs, on_sources=sources.extend)
        nbest = translate_text(self.loaded, self.model, lines, self.cfg, self.device, options)
        # strict: a way of translating that reported no source lengths would leave its
        # lines out of the length check without a word
        self.lengths.extend((n, len(h[0].tokens)) for n, h in zip(sources, nbest, strict=True))
        if self.files.attention_option() is not None:
            best = [h[0].tokens for h in nbest]
            links = attention_outputs(self.loaded, lines, best, self.files.attention_dir, first)
            if self.write_links is not None:
                self.write_links("".join(format_pharaoh(a) + "\n" for a in links))
        self.write(format_output(nbest, self.request.n_best, first))


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
