"""Ensembles: several models of one vocabulary decoding together.

At each step every member reads the same target prefix and the ensemble's
log-probabilities are the mean of the members' (a log-linear combination, a
product of experts, Hinton 2002; Marian weighs log-probabilities the same way,
fairseq averages probabilities instead), renormalised by the search. Each member
keeps its own encoder memory and caches.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from nmt.model.decoder import DecoderState
from nmt.model.seq2seq import Transformer
from nmt.setup.model import ModelConfig


@dataclass
class EnsembleState:
    """One :class:`DecoderState` per member, reordered together."""

    members: list[DecoderState]

    def select(self, index: Tensor, same_source: bool = False) -> EnsembleState:
        return EnsembleState([s.select(index, same_source) for s in self.members])


class Ensemble(nn.Module):
    """The decoding interface of :class:`Transformer` (``encode``,
    ``decoder_state``, ``decode_step``, ``cfg``) over several models: what greedy,
    sampling and beam search need, nothing else (training and attention maps take
    one model)."""

    def __init__(self, models: list[Transformer]) -> None:
        super().__init__()
        self.members = nn.ModuleList(models)
        # The tightest position limit binds every member.
        self.cfg: ModelConfig = min((m.cfg for m in models), key=lambda c: c.max_positions)

    def encode(self, src: Tensor) -> tuple[list[Tensor], Tensor]:
        """src (B,S) -> each member's memory (B,S,D_m), and the source mask (B,1,S)."""
        encoded = [m.encode(src) for m in self.members]
        return [memory for memory, _ in encoded], encoded[0][1]

    def decoder_state(
        self,
        memories: list[Tensor],
        src_mask: Tensor,
        incremental: bool = False,
        src: Tensor | None = None,
    ) -> EnsembleState:
        return EnsembleState(
            [m.decoder_state(x, src_mask, incremental, src) for m, x in zip(self.members, memories)]
        )

    def decode_step(
        self, tgt_in: Tensor, state: EnsembleState, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """Target ids (B,T) -> the mean of the members' log-probabilities (B,T,V),
        which the search treats as logits, and, when asked, the mean of the members'
        cross-attention (B,T,S) (they read the same source pieces)."""
        steps = [
            m.decode_step(tgt_in, s, need_weights) for m, s in zip(self.members, state.members)
        ]
        logps = torch.stack([torch.log_softmax(logits.float(), dim=-1) for logits, _ in steps])
        if not need_weights:
            return logps.mean(0), None
        return logps.mean(0), torch.stack([w.float() for _, w in steps]).mean(0)
