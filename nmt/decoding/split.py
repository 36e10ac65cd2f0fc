"""``decode.split: sentences``: each line cut into its sentences, every sentence of
every line translated in one batch with the rest, and the outputs joined back into
one line per input line (nmt.data.sentences). A model trained on single sentences
stops after about one sentence of a longer line (docs/results.md, "Long inputs");
translated one at a time, every sentence of the line is there.

``decode.split: marks``: each line read whole, with a separator between its
sentences: what a sentence-group model (``model.decoder.group_layers``) was
trained on, so that each target sentence attends to its own source sentence in
the lower layers and to the whole line above them.

With ``decode.split: none`` this is :func:`nmt.decoding.search.translate_lines`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch

from nmt.data.sentences import Segment, joiner, segmenter, split_lines
from nmt.decoding.search import (
    Listener,
    Options,
    Translation,
    detokenised,
    encode_marked,
    translate_ids,
    translate_lines,
)
from nmt.errors import NmtError
from nmt.model.load import Loaded
from nmt.setup.decoding import DecodeConfig


def translate_text(
    loaded: Loaded,
    model: Any,
    lines: list[str],
    cfg: DecodeConfig,
    device: torch.device,
    options: Options = Options(),
) -> list[list[Translation]]:
    """``lines`` translated by ``model`` (``loaded``'s, or an ensemble of it with
    others: its vocabularies and languages) under ``cfg``, cut into sentences where
    ``cfg.split`` says so."""
    v = loaded.vocabs
    if cfg.split == "none":
        return translate_lines(model, v.src, v.tgt, lines, cfg, device, options)
    data = loaded.cfg.data
    sentences, owners = split_lines(lines, sentence_rules(loaded, cfg, options.refs is not None))
    plain = dataclasses.replace(cfg, split="none")
    if cfg.split == "marks":
        return marked(loaded, model, by_line(sentences, owners, len(lines)), plain, device, options)
    progress = None if options.progress is None else InLines(options.progress, len(lines))
    heard: list[int] = []  # each sentence's source pieces
    on_sentences = dataclasses.replace(options, progress=progress, on_sources=heard.extend)
    each = translate_lines(model, v.src, v.tgt, sentences, plain, device, on_sentences)
    if options.on_sources is not None:  # a line's: its sentences', each read whole
        pieces = [0] * len(lines)
        for n, line in zip(heard, owners, strict=True):
            pieces[line] += n
        options.on_sources(pieces)
    return joined(each, owners, len(lines), joiner(data.tgt_lang))


def sentence_rules(loaded: Loaded, cfg: DecodeConfig, oracle: bool = False) -> Segment:
    """The segmenter that ``cfg.split`` cuts ``loaded``'s source lines with; an error,
    before any work, for a language without rules (naming decode.split_lang), the
    oracle length, which has no per-sentence reference, or marks for a model that has
    no sentence separator."""
    if oracle:
        raise NmtError(
            "--length oracle: a reference's length is that of the whole line, not of each "
            "sentence; translate with decode.split none"
        )
    if cfg.split == "marks" and loaded.vocabs.src.separator is None:
        raise NmtError(
            "decode.split marks: this model has no sentence separator (it was trained "
            "without model.decoder.group_layers); use --split sentences"
        )
    return segmenter(cfg.split_lang or loaded.cfg.data.src_lang)


def marked(
    loaded: Loaded,
    model: Any,
    lines: list[list[str]],
    cfg: DecodeConfig,
    device: torch.device,
    options: Options,
) -> list[list[Translation]]:
    """Lines given as their sentences, each translated whole with a separator
    between its sentences."""
    v = loaded.vocabs
    limit = model.cfg.max_positions - 1
    ids = encode_marked(v.src, lines, limit, options.on_truncated)
    if options.on_sources is not None:
        options.on_sources([len(s) for s in ids])
    model.eval()
    return detokenised(v.tgt, translate_ids(model, ids, cfg, device, options))


def by_line(sentences: list[str], owners: list[int], n: int) -> list[list[str]]:
    """The non-empty sentences of each of the ``n`` lines."""
    lines: list[list[str]] = [[] for _ in range(n)]
    for sentence, line in zip(sentences, owners):
        if sentence:
            lines[line].append(sentence)
    return lines


def joined(
    each: list[list[Translation]], owners: list[int], n: int, between: str
) -> list[list[Translation]]:
    """The 1-best translations of sentences, one line's after another, as one
    translation per line: texts joined by ``between``, pieces one after another,
    scores summed."""
    parts: list[list[Translation]] = [[] for _ in range(n)]
    for line, hyps in zip(owners, each):
        parts[line].append(hyps[0])
    return [
        [
            Translation(
                between.join(t.text for t in p if t.text),
                sum(t.score for t in p),
                [piece for t in p for piece in t.tokens],
            )
        ]
        for p in parts
    ]


@dataclass
class InLines:
    """A translation's progress counted in lines (``progress``'s count), fed its
    sentences: each sentence done is its share of a line, reported in whole lines (all
    of them by the last sentence); the work is passed on as it is."""

    progress: Listener
    lines: int
    sentences: int = 0  # planned
    done_sentences: int = 0
    done_lines: int = 0

    def planned(self, sentences: int, work: int) -> None:
        self.sentences += sentences
        self.progress.planned(self.lines, work)

    def done(self, sentences: int, work: int = 0) -> None:
        self.done_sentences += sentences
        now = self.done_sentences * self.lines // max(self.sentences, 1)
        self.progress.done(now - self.done_lines, work)
        self.done_lines = now
