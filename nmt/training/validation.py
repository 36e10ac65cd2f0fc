"""Validation on the dev set: what early stopping and ``best.pt`` are chosen by."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from nmt.data.vocab import PAD
from nmt.decoding.metrics import bleu
from nmt.decoding.search import Listener, Options, translate_lines
from nmt.model.seq2seq import Transformer

if TYPE_CHECKING:
    from nmt.setup.recipe import RunConfig
    from nmt.training.build import TrainingData


@torch.no_grad()
def dev_scores(
    model: Transformer,
    data: TrainingData,
    cfg: RunConfig,
    device: torch.device,
    bf16: bool,
    progress: Listener | None = None,
) -> dict[str, float]:
    """Dev loss and perplexity (teacher forced), and the BLEU of greedy decoding when
    ``train.valid_bleu``; ``progress`` follows the decoding."""
    model.eval()
    amp = {"device_type": device.type, "dtype": torch.bfloat16, "enabled": bf16}
    nll = tokens = 0.0
    for idx in data.dev.epoch_batches(cfg.train.batch_tokens, 0, 0):
        batch = data.dev.collate(idx).to(device)
        with torch.autocast(**amp):
            logits = model(batch.src, batch.tgt_in)  # (B,T,V)
        nll += float(
            F.cross_entropy(
                logits.float().flatten(0, 1),
                batch.tgt_out.flatten(),
                ignore_index=PAD,
                reduction="sum",
            )
        )
        tokens += batch.tgt_tokens
    out = {"valid_loss": nll / tokens, "valid_ppl": math.exp(min(nll / tokens, 50.0))}
    if cfg.train.valid_bleu:
        # greedy, without the terms that rank beams (a recipe may decode its tests with them)
        changes = {"beam": 1, "n_best": 1, "coverage": 0.0, "word_reward": 0.0}
        greedy = dataclasses.replace(cfg.decode, **changes)
        with torch.autocast(**amp):
            v, options = data.vocabs, Options(progress=progress)
            hyps = translate_lines(model, v.src, v.tgt, data.dev_src, greedy, device, options)
        out["valid_bleu"] = bleu([h[0].text for h in hyps], data.dev_refs)
    return out
