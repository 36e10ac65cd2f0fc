"""Sparsemax attention: global attention whose weights can be exactly zero.

Sparsemax (Martins & Astudillo 2016, sec. 2) replaces the softmax by the
Euclidean projection of the scores onto the probability simplex,
sparsemax(z) = argmin_{p ∈ Δ} ‖p − z‖², which is p_s = max(z_s − τ, 0) with
the threshold τ chosen so that the weights sum to one (their Algorithm 1: sort,
find the support size k, τ = (Σ_{j ≤ k} z_(j) − 1) / k). Positions scoring
less than τ get no weight at all, so a heatmap shows which source words were
attended and which were not. The gradient, diag(s) − s sᵀ/|S| over the support
S (their Proposition 2), is what autograd derives from this computation.

This module is also the worked example of docs/extending.md: a variant is a
config, a class under the registry, and one import in ``nmt/attention/__init__.py``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from nmt.attention.base import (
    AttentionOutput,
    Context,
    CrossAttention,
    Memory,
)


def sparsemax(scores: Tensor, mask: Tensor) -> Tensor:
    """Sparsemax over the last dim where ``mask`` is True (broadcastable); masked
    positions, and every position of a fully masked row, get 0.

    Computed in float32 at least: τ comes from a cumulative sum of sorted scores,
    and in bf16 (autocast's matmul output) its rounding leaves rows that do not
    sum to one (tests/attention/test_sparsemax.py)."""
    dtype = torch.promote_types(scores.dtype, torch.float32)
    z = scores.to(dtype).masked_fill(~mask, torch.finfo(dtype).min)  # (..., S)
    ranked, _ = z.sort(dim=-1, descending=True)  # z_(1) >= z_(2) >= ...
    k = torch.arange(1, z.size(-1) + 1, device=z.device, dtype=z.dtype)  # (S,)
    total = ranked.cumsum(-1)  # (..., S) Σ_{j ≤ k} z_(j)
    in_support = 1 + k * ranked > total  # (..., S) true for k = 1..|S|, then false
    size = in_support.sum(-1, keepdim=True).clamp(min=1)  # (..., 1) |S|
    tau = (total.gather(-1, size - 1) - 1) / size.to(z.dtype)  # (..., 1)
    return (z - tau).clamp(min=0) * mask


class SparsemaxAttention(CrossAttention):
    """a_t = sparsemax_s(score(q_t, k_s)) over real source positions s;
    context c_t = Σ_s a_t(s) v_s (Martins & Astudillo 2016, sec. 4)."""

    def forward(self, query: Tensor, memory: Memory, ctx: Context) -> AttentionOutput:
        q = self.queries(query)  # (B,H,T,Dh)
        weights = sparsemax(self.scores(q, memory, ctx), memory.mask.unsqueeze(1))  # (B,H,T,S)
        heads = self.dropout(weights).to(memory.value.dtype) @ memory.value  # (B,H,T,Dh)
        return AttentionOutput(self.output(heads), weights if ctx.need_weights else None)
