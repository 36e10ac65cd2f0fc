"""The objective: the loss of one batch, apart from the loop that runs the updates.

A training regime (``train.trainer`` in a recipe) is an objective registered in
``TRAINERS`` (nmt.setup.training): teacher forcing here, two-pass scheduled
sampling in nmt.training.scheduled_sampling. The trainer builds the recipe's
objective once and calls it on every batch; under data-parallel training DDP
wraps the objective itself, so every pass a regime makes runs under one DDP
forward. An objective returns a typed :class:`Loss`: the summed objective to
back-propagate, the summed token loss the trainer logs per target token, and
its own statistics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.attention.base import AttentionOutput
from nmt.data.batching import Batch
from nmt.data.vocab import PAD
from nmt.kernels.loss import projected_smoothed_nll
from nmt.model.seq2seq import Transformer
from nmt.training.guided_alignment import alignment_loss

if TYPE_CHECKING:
    from nmt.setup.recipe import RunConfig


class Loss(NamedTuple):
    """One batch's objective (a NamedTuple, so that DDP finds the tensor in it)."""

    total: Tensor  # the summed objective, to back-propagate
    token_loss: float  # the summed label-smoothed cross-entropy, for the log
    stats: dict[str, float]  # the objective's own figures to log


class TeacherForcing(nn.Module):
    """Teacher forcing: the decoder reads the gold prefix (Williams & Zipser 1989),
    with label-smoothed cross-entropy (Szegedy et al. 2016), the cross-attention's
    own loss term (hard attention's REINFORCE) and, under ``train.alignment``,
    guided alignment. Under ``train.kernels: auto`` the output layer runs fused
    with the loss (nmt.kernels.loss), chosen once here."""

    def __init__(self, model: Transformer, cfg: RunConfig) -> None:
        super().__init__()
        self.model = model
        self.label_smoothing = cfg.train.label_smoothing
        self.guide = cfg.train.alignment
        self.cfg = cfg.train.trainer
        fused = cfg.train.kernels == "auto"
        self.token_loss = self.fused_token_loss if fused else self.plain_token_loss

    def forward(self, batch: Batch, step: int) -> Loss:
        """The loss of ``batch`` at optimiser update ``step`` (0-based)."""
        guided = self.guide is not None
        states, attention = self.model.states(batch.src, batch.tgt_in, guided, step)
        return self.model_loss(states, attention, batch)

    def fused_token_loss(self, states: Tensor, batch: Batch) -> tuple[Tensor, Tensor]:
        """Final decoder states (B,T,D) through the output layer -> the summed
        label-smoothed cross-entropy over real target tokens ((1 − ε)·NLL + ε·mean
        over the vocabulary of −log p), and its detached negation per target token
        (B,T), 0 at padding: hard attention's reward. One objective for both, so
        REINFORCE's score-function term and the pathwise gradient add up to the
        gradient of the expected smoothed loss."""
        weight = self.model.output.weight
        loss = projected_smoothed_nll(states, weight, batch.tgt_out, self.label_smoothing, PAD)
        return loss.sum(), -loss.detach()  # loss (B,T)

    def plain_token_loss(self, states: Tensor, batch: Batch) -> tuple[Tensor, Tensor]:
        """:meth:`fused_token_loss` through PyTorch's own output layer and loss."""
        logits = self.model.output(states).float()  # (B,T,V)
        loss = F.cross_entropy(
            logits.transpose(1, 2),
            batch.tgt_out,
            ignore_index=PAD,
            label_smoothing=self.label_smoothing,
            reduction="none",
        )  # (B,T)
        return loss.sum(), -loss.detach()

    def model_loss(
        self, states: Tensor, attention: list[list[AttentionOutput]], batch: Batch
    ) -> Loss:
        """Token loss of the final decoder states (B,T,D) plus the cross-attention's
        own loss term (from the decoder's ``attention``) and guided alignment."""
        loss, reward = self.token_loss(states, batch)
        token_loss = float(loss.detach())
        extra, stats = attention_loss(attention, reward, batch.tgt_out != PAD)
        if extra is not None:
            loss = loss + extra
        if self.guide is not None:
            assert batch.align is not None, "the training data carries no alignments"
            aligned, align_stats = alignment_loss(attention, batch.align, self.guide)
            loss, stats = loss + aligned, {**stats, **align_stats}
        return Loss(loss, token_loss, stats)

    def summary(self, step_seconds: float) -> dict[str, Any]:
        """Figures for the run's summary, given the time spent in training steps."""
        return {}


def attention_loss(
    attention: list[list[AttentionOutput]], reward: Tensor, tgt_mask: Tensor
) -> tuple[Tensor | None, dict[str, float]]:
    """The cross-attention's own loss terms (hard attention's REINFORCE) that came
    up with its outputs, per layer (what the decoder returned), summed (None: there
    are none), and the mean over layers of their figures, as ``attn_*``.

    reward (B,T): detached reward of each target token (minus its training loss);
    tgt_mask (B,T).
    """
    losses, stats = [], {}
    for calls in attention:
        terms = [call.loss for call in calls if call.loss is not None]
        if not terms:
            continue
        loss, layer_stats = terms[0].total(terms, reward, tgt_mask)
        losses.append(loss)
        for k, v in layer_stats.items():
            stats.setdefault(f"attn_{k}", []).append(v)
    total = torch.stack(losses).sum() if losses else None
    return total, {k: sum(v) / len(v) for k, v in stats.items()}
