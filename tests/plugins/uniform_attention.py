"""A user's attention kind, written outside the nmt package: every query attends
uniformly to the real source positions (a baseline with no alignment at all).

tests/setup/test_plugins.py copies this file to a temporary directory and trains,
resumes, translates and compares with it through ``--plugin uniform_attention``."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from nmt.attention.base import AttentionOutput, Context, CrossAttention, Memory
from nmt.setup.attention import ATTENTION, AttentionConfig


@dataclass(frozen=True)
class UniformConfig(AttentionConfig):
    kind: str = "uniform"


@ATTENTION.register("uniform", config=UniformConfig)
class UniformAttention(CrossAttention):
    """a_t(s) = 1/S_b over the real source positions s; c_t = Σ_s a_t(s) v_s."""

    def forward(self, query: Tensor, memory: Memory, ctx: Context) -> AttentionOutput:
        B, T, _ = query.shape
        real = memory.mask.unsqueeze(1).to(query.dtype)  # (B,1,1,S)
        weights = (real / real.sum(-1, keepdim=True).clamp(min=1)).expand(B, self.heads, T, -1)
        context = weights @ memory.value  # (B,H,T,Dh)
        return AttentionOutput(self.output(context), weights if ctx.need_weights else None)
