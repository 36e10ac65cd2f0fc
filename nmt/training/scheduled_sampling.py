"""Two-pass scheduled sampling for Transformers (Mihaylova & Martins 2019), with the
multi-pass extension of Duckworth et al. 2019.

A Transformer decoder reads the whole gold prefix at once, so per-step scheduled
sampling (Bengio et al. 2015) does not apply. Instead:

1. pass 1: an ordinary teacher-forced decoder pass -> logits at every position
   (no gradient unless ``first_pass_grad``);
2. mix: every target input position t >= 1 keeps its gold embedding with
   probability ε_i, else receives an embedding built from pass 1's prediction for
   that position (``mix``); padding is never mixed;
3. pass 2: the decoder on the mixed inputs; only its loss (against gold) trains.
With ``passes: N`` steps 1-2 repeat on the previous pass's predictions.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import Tensor

from nmt.data.batching import Batch
from nmt.data.vocab import PAD
from nmt.model.seq2seq import Transformer
from nmt.setup.training import ScheduledSamplingConfig
from nmt.training.objective import Loss, TeacherForcing

if TYPE_CHECKING:
    from nmt.setup.recipe import RunConfig


def gold_probability(cfg: ScheduledSamplingConfig, step: int) -> float:
    """ε_i at training step ``step`` (0-based), clipped to [0, 1]."""
    if step < cfg.warmup_steps:
        return 1.0
    i = step - cfg.warmup_steps
    if cfg.schedule == "linear":
        eps = max(cfg.eps_min, cfg.k - cfg.c * i)
    elif cfg.schedule == "exponential":
        eps = cfg.k**i
    elif cfg.schedule == "inverse_sigmoid":
        eps = cfg.k / (cfg.k + math.exp(min(i / cfg.k, 700.0)))
    else:
        eps = cfg.k
    return min(1.0, max(0.0, eps))


def prediction_embeddings(logits: Tensor, table: Tensor, cfg: ScheduledSamplingConfig) -> Tensor:
    """logits (..., V), embedding table (V,D) -> embeddings of the predictions (..., D)."""
    if cfg.mix == "argmax":
        return F.embedding(logits.argmax(-1), table)
    if cfg.mix == "sample":
        probs = torch.softmax(logits.float(), -1)
        ids = torch.multinomial(probs.reshape(-1, probs.size(-1)), 1).view(logits.shape[:-1])
        return F.embedding(ids, table)
    if cfg.mix == "topk":
        top, ids = logits.topk(cfg.topk, dim=-1)  # (..., k)
        weights = torch.softmax(top.float(), -1).to(table.dtype)  # renormalised over the k best
        return (weights.unsqueeze(-1) * F.embedding(ids, table)).sum(-2)
    if cfg.mix == "softmax":
        return torch.softmax(logits.float() / cfg.temperature, -1).to(table.dtype) @ table
    return F.gumbel_softmax(logits.float(), tau=cfg.temperature, dim=-1).to(table.dtype) @ table


class ScheduledSampling(TeacherForcing):
    """See the module docstring; options under ``train.trainer``."""

    def __init__(self, model: Transformer, cfg: RunConfig) -> None:
        super().__init__(model, cfg)
        self.extra_seconds = 0.0  # time spent in the extra passes, for the cost report

    def summary(self, step_seconds: float) -> dict[str, Any]:
        """What the extra passes cost: the time per step against teacher forcing's."""
        if step_seconds == 0:  # a resume with the budget already spent: no steps
            return {}
        # Teacher forcing would have cost the step time without the extra passes.
        return {
            "cost_vs_teacher_forcing": step_seconds / max(step_seconds - self.extra_seconds, 1e-9)
        }

    def forward(self, batch: Batch, step: int) -> Loss:
        cfg = self.cfg
        eps = gold_probability(cfg, step)
        if eps >= 1.0:  # warm-up or ε = 1: exactly teacher forcing, one pass
            loss = super().forward(batch, step)
            return loss._replace(stats={**loss.stats, "ss_gold_prob": 1.0, "ss_replaced": 0.0})
        model = self.model
        shift = model.tied_shift(batch.src)  # every pass's targets share it
        memory, src_mask = model.encode(batch.src, shift)
        # Without self-attention caches the state is read-only: every pass shares it,
        # so the encoder keys and values are projected once.
        state = model.decoder_state(memory, src_mask, src=batch.src, shift=shift)
        table = model.tgt_embed.tokens.weight  # (V,D)
        gold = F.embedding(batch.tgt_in, table)  # (B,T,D)
        # Position t >= 1 may be replaced by the prediction made at t - 1.
        real = batch.tgt_in != PAD  # (B,T)
        mixable = real.clone()
        mixable[:, 0] = False
        x, replaced = gold, torch.zeros_like(mixable)
        start = time.perf_counter()
        for _ in range(cfg.passes - 1):
            # Choose the replaced positions first: only their predictions are needed, so
            # the output projection (V wide, the costliest layer) runs on those rows only.
            replaced = mixable & (torch.rand(mixable.shape, device=x.device) >= eps)  # (B,T)
            with torch.set_grad_enabled(cfg.first_pass_grad and torch.is_grad_enabled()):
                states, _ = model.decode_states(batch.tgt_in, state, x, tgt_mask=real, update=step)
                rows = states[:, :-1][replaced[:, 1:]]  # (N,D): output t-1 predicts input t
                pred = prediction_embeddings(model.output(rows), table, cfg)  # (N,D)
            x = gold.masked_scatter(replaced.unsqueeze(-1), pred.to(gold.dtype))  # (B,T,D)
        self.extra_seconds += time.perf_counter() - start
        guided = self.guide is not None  # keep the weights it supervises
        states, attention = model.decode_states(
            batch.tgt_in, state, x, guided, real, step
        )  # (B,T,D)
        loss = self.model_loss(states, attention, batch)
        fraction = float(replaced.sum()) / max(int(mixable.sum()), 1)
        return loss._replace(stats={**loss.stats, "ss_gold_prob": eps, "ss_replaced": fraction})
