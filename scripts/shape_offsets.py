"""Decode trained runs with their positions moved: what docs/results.md's SHAPE sections
cite to ask whether a SHAPE model (Kiyono et al. 2021) loses BLEU because decoding
starts its positions at 0, an offset its training drew only once in shift + 1 times.

For each run and each pair S:T of offsets, the run's model (``nmt evaluate``'s:
best.pt, or the mean of its last checkpoints under ``decode.average_last``) translates
SPLIT with the run's own search settings, its source positions starting at S and its
target positions at T instead of 0 and 0; the outputs are scored against the
references with sacreBLEU (BLEU, chrF, and the length ratio, output words over
reference words). 0:0 is what ``nmt evaluate`` does. A model trained without a shift
has never seen a position past its longest sentence, so a control run (global) tells
how much an offset unseen in training costs. Usage:

    python scripts/shape_offsets.py OUT.json SPLIT RUN [RUN ...] [--offsets 0:0 50:50 ...]
"""

from __future__ import annotations

import argparse
import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sacrebleu
import torch
from torch import Tensor

from nmt.compare.analysis import recipe_of
from nmt.data.pipeline import load_split
from nmt.decoding.evaluate import evaluated_model
from nmt.decoding.search import Options, translate_lines
from nmt.model.decoder import DecoderState
from nmt.model.seq2seq import Transformer


def moved(model: Transformer, source: int, target: int) -> Transformer:
    """``model``, whose source positions start at ``source`` and target positions at
    ``target`` when it decodes: the offsets a SHAPE draw gives in training, given.
    Its class's methods are wrapped, so that moving it again replaces the offsets."""
    encode = functools.partial(type(model).encode, model)
    state_of = functools.partial(type(model).decoder_state, model)

    def encode_moved(src: Tensor, shift: Tensor | None = None) -> tuple[Tensor, Tensor]:
        return encode(src, torch.full((src.size(0), 1), source, device=src.device))

    def state_moved(memory: Tensor, *rest: Any, **named: Any) -> DecoderState:
        named["shift"] = torch.full((memory.size(0), 1), target, device=memory.device)
        return state_of(memory, *rest, **named)

    model.encode, model.decoder_state = encode_moved, state_moved
    return model


def run_figures(
    run: Path, split: str, pairs: list[tuple[int, int]]
) -> Iterator[tuple[str, dict[str, float]]]:
    """``S:T`` and the scores of SPLIT decoded from those offsets, for each pair: the
    run's model and the split read once."""
    lines, refs = load_split(recipe_of(run).data, split)
    cpu = torch.device("cpu")
    loaded = evaluated_model(run, cpu)
    cut = Options(on_truncated=lambda n: print(f"{run}: {n} lines cut to the model's positions"))
    vocabs = loaded.vocabs
    for source, target in pairs:
        model = moved(loaded.model, source, target)
        found = translate_lines(model, vocabs.src, vocabs.tgt, lines, loaded.cfg.decode, cpu, cut)
        hyps = [n[0].text for n in found]
        bleu, chrf = sacrebleu.corpus_bleu(hyps, [refs]), sacrebleu.corpus_chrf(hyps, [refs])
        scores = {"bleu": bleu.score, "chrf": chrf.score, "ratio": bleu.sys_len / bleu.ref_len}
        yield f"{source}:{target}", scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("split")
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--offsets", nargs="+", default=["0:0", "50:50", "100:100"])
    args = parser.parse_args()
    pairs = [tuple(int(k) for k in pair.split(":")) for pair in args.offsets]
    data = {}
    for run in args.runs:
        data[str(run)] = {}
        for pair, found in run_figures(run, args.split, pairs):
            data[str(run)][pair] = found
            print(f"{run} {pair} BLEU {found['bleu']:.2f} ratio {found['ratio']:.3f}")
            args.out.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
