"""Global attention: every query attends to every real source position."""

from __future__ import annotations

import torch
from torch import Tensor

from nmt.attention.base import (
    AttentionOutput,
    Context,
    CrossAttention,
    Memory,
    key_bias,
    masked_softmax,
)
from nmt.attention.sdpa import scaled_dot_product


class GlobalAttention(CrossAttention):
    """Luong et al. 2015 "global" attention (sec. 3.1, eq. 7-8) — with ``score: dot``
    exactly Vaswani et al. 2017's encoder-decoder attention (eq. 1).

    a_t(s) = softmax_s(score(q_t, k_s)) over real source positions s;
    context c_t = sum_s a_t(s) v_s.
    """

    def forward(self, query: Tensor, memory: Memory, ctx: Context) -> AttentionOutput:
        q = self.queries(query)  # (B,H,T,Dh)
        mask = memory.mask.unsqueeze(1)  # (B,1,1,S), a group layer's (B,1,T,S)
        if self.cfg.score == "dot" and not ctx.need_weights:
            # Fused kernel. A finite bias (not a boolean mask) keeps a fully masked
            # row NaN-free; multiplying by ``any`` then zeroes it, as masked_softmax does.
            bias = key_bias(mask, q.dtype)  # (B,1,1,S)
            if ctx.cross_bias is not None:  # cross_alibi
                keys = torch.arange(mask.size(-1), device=q.device)
                bias = bias + ctx.cross_bias.scores(self.heads, keys).to(q.dtype)
            p = self.dropout.p if self.training else 0.0
            heads = scaled_dot_product(q, memory.key, memory.value, bias, dropout=p)  # (B,H,T,Dh)
            return AttentionOutput(self.output(heads * mask.any(dim=-1, keepdim=True)))
        weights = masked_softmax(self.scores(q, memory, ctx), mask)  # (B,H,T,S)
        heads = self.dropout(weights) @ memory.value  # (B,H,T,Dh)
        return AttentionOutput(self.output(heads), weights if ctx.need_weights else None)
