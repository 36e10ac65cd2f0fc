"""Decoding speed of a trained run on a test set: greedy and beam search, with BLEU,
for the cached incremental decoder and for one that recomputes the whole prefix at
every step (what a decoder without a key/value cache does).

    python benchmarks/decode_speed.py runs/multi30k-de-en --split test_2016_flickr
    python benchmarks/decode_speed.py runs/multi30k-de-en --device cuda --no-recompute
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import torch
from torch import Tensor

from nmt.data.pipeline import load_split
from nmt.decoding.metrics import bleu
from nmt.decoding.search import translate_lines
from nmt.model.decoder import DecoderState
from nmt.model.load import load_model
from nmt.model.seq2seq import Transformer


@dataclasses.dataclass
class PrefixState(DecoderState):
    prefix: Tensor | None = None  # (N,t) every target id so far

    def select(self, index: Tensor, same_source: bool = False) -> PrefixState:
        base = super().select(index, same_source)
        prefix = None if self.prefix is None else self.prefix[index]
        return PrefixState(base.memories, None, 0, prefix=prefix)


class Recompute(torch.nn.Module):
    """Wraps a model so each step re-runs the decoder over the whole prefix."""

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model, self.cfg = model, model.cfg

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        return self.model.encode(src)

    def decoder_state(
        self, memory: Tensor, src_mask: Tensor, incremental: bool = False
    ) -> PrefixState:
        state = self.model.decoder_state(memory, src_mask)
        return PrefixState(state.memories)

    def decode_step(
        self, last: Tensor, state: PrefixState, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        state.prefix = last if state.prefix is None else torch.cat([state.prefix, last], 1)
        logits, weights = self.model.decode_step(state.prefix, state, need_weights)
        return logits[:, -1:], None if weights is None else weights[:, -1:]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="run directory or checkpoint")
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--data", default=None, help="override data.dir of the recipe")
    p.add_argument("--beams", default="1,5")
    p.add_argument("--no-recompute", action="store_true", help="skip the slow baseline")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    args = p.parse_args()
    device = torch.device(args.device)
    loaded = load_model(args.run, device)
    data_cfg = loaded.cfg.data
    if args.data:
        data_cfg = dataclasses.replace(data_cfg, dir=args.data)
    src, refs = load_split(data_cfg, args.split)
    print(f"{args.split}: {len(src)} sentences, {torch.get_num_threads()} threads")
    decoders = [("cached", loaded.model)]
    if not args.no_recompute:
        decoders.append(("recompute", Recompute(loaded.model)))
    for beam in (int(b) for b in args.beams.split(",")):
        cfg = dataclasses.replace(loaded.cfg.decode, beam=beam, n_best=1)
        for name, model in decoders:
            start = time.perf_counter()
            with torch.inference_mode():
                out = translate_lines(model, loaded.vocabs.src, loaded.vocabs.tgt, src, cfg, device)
            if device.type == "cuda":
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            score = bleu([h[0].text for h in out], refs)
            print(
                f"beam {beam}  {name:9s}  {seconds:7.1f} s  {len(src) / seconds:7.1f} sent/s  "
                f"BLEU {score:.2f}"
            )


if __name__ == "__main__":
    main()
