"""``decode.split: sentences``: each line cut into its sentences, every sentence of
every line translated in one batch with the rest, and the outputs joined back into
one line per input line (nmt.data.sentences). A model trained on single sentences
stops after about one sentence of a longer line (docs/results.md, "Long inputs");
translated one at a time, every sentence of the line is there.

With ``decode.split: none`` this is :func:`nmt.decoding.search.translate_lines`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from nmt.data.sentences import joiner, segmenter, split_lines
from nmt.decoding.search import Options, Translation, translate_lines
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
    if options.refs is not None:
        raise NmtError(
            "--length oracle: a reference's length is that of the whole line, not of each "
            "sentence; translate with decode.split none"
        )
    data = loaded.cfg.data
    sentences, owners = split_lines(lines, segmenter(cfg.split_lang or data.src_lang))
    progress = in_lines(options.on_batch, len(lines), len(sentences))
    plain = dataclasses.replace(cfg, split="none")
    on_sentences = dataclasses.replace(options, on_batch=progress)
    each = translate_lines(model, v.src, v.tgt, sentences, plain, device, on_sentences)
    return joined(each, owners, len(lines), joiner(data.tgt_lang))


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


def in_lines(
    on_batch: Callable[[int], None] | None, lines: int, sentences: int
) -> Callable[[int], None] | None:
    """A progress callback counting lines, fed sentences: each sentence done is its
    share of a line, reported in whole lines (all of them by the last sentence)."""
    if on_batch is None or not sentences:
        return on_batch
    done = {"sentences": 0, "lines": 0}

    def advance(n: int) -> None:
        done["sentences"] += n
        now = done["sentences"] * lines // sentences
        if now > done["lines"]:
            on_batch(now - done["lines"])
            done["lines"] = now

    return advance
