"""Attention-flow fusion of the cross-attention output (BiDAF, Seo et al. 2017).

BiDAF (sec. 2.4, eq. 2-4) lets a reading-comprehension model look both ways:
context-to-query attention (here: the decoder's cross-attention context c_t)
and query-to-context attention, a summary of the context words that match the
query best, h̃ = Σ_t b_t h_t with b = softmax_t(max_s S_ts). It then fuses
G_t = [h_t; c_t; h_t ∘ c_t; h_t ∘ h̃] (eq. 4; β of eq. 2).

Carried over to a decoder, the "context words" are target positions, and a
summary over all of them would read the future. Here it is causal: at target
position t, c̃_t = Σ_{t' ≤ t} b_{t,t'} h_t' with b_{t,·} = softmax over t' ≤ t
(or over what the factorisation order lets t see, for the two-stream decoder)
of m_t' = max_s score(h_t', k_s), the layer's own cross-attention score maxed
over real source positions, per head, with every term of the score: a score
that leaves out a term constant over source positions (the trilinear score's
w_qᵀq, which differs between target positions) gets it back here, the fusion
owning w_q. A linear layer maps the 4·D fusion back to D. Cost: one extra T × S
score matrix per layer (whatever the variant attends to) and a T × T softmax.

Fusion is a decoder-layer option (``model.decoder.fusion``): the layer calls its
cross-attention, whatever the variant, and then the fusion on what it returned.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor, nn

from nmt.attention.base import (
    AttentionOutput,
    Context,
    CrossAttention,
    Memory,
    masked_softmax,
    merge_heads,
    split_heads,
)


class BiDAFFusion(nn.Module):
    """Linear([h; c; h∘c; h∘c̃]) in place of the cross-attention's context c; see
    the module docstring. Parameter names (``query_term``, ``proj``) are the
    checkpoint format."""

    def __init__(self, attn: CrossAttention, d_model: int) -> None:
        super().__init__()
        heads, head_dim = attn.heads, attn.head_dim
        # w_q of a score that omits it (trilinear), from zero; declared before proj,
        # so that parameters keep their order in the optimiser's state
        self.query_term = (
            nn.Parameter(torch.zeros(heads, head_dim)) if attn.score.omits_query_term else None
        )
        self.proj = nn.Linear(4 * d_model, d_model)

    def forward(
        self,
        h: Tensor,
        attended: AttentionOutput,
        attn: CrossAttention,
        memory: Memory,
        ctx: Context,
        see: Tensor | None = None,
        cache: dict[str, Tensor] | None = None,
    ) -> AttentionOutput:
        """h (B,T,D) the normed decoder states (the cross-attention's queries), what
        the layer's cross-attention ``attn`` returned for them, and what it read ->
        the same :class:`AttentionOutput` with the fused context (B,T,D). ``see`` (B,T,t)
        which target positions each query may summarise (None: causal); ``cache``
        this module's own state between incremental decoding steps (m and h of
        earlier positions; None in training)."""
        # 1) m_t = max over real source positions of the full score, per head
        q = attn.queries(h)  # (B,H,T,Dh)
        scores = attn.scores(q, memory, ctx)  # (B,H,T,S)
        mask = memory.mask.unsqueeze(1)  # (B,1,1,S), a group layer's (B,1,T,S)
        m = scores.masked_fill(~mask, torch.finfo(scores.dtype).min).amax(-1)  # (B,H,T)
        if self.query_term is not None:  # w_qᵀq, constant over s: added after the max
            m = m + (q @ self.query_term.unsqueeze(-1)).squeeze(-1)  # (B,H,T)
        states = split_heads(h, attn.heads)  # (B,H,T,Dh)
        if cache is not None:
            if "m" in cache:
                m = torch.cat([cache["m"], m], -1)  # (B,H,t)
                states = torch.cat([cache["h"], states], 2)  # (B,H,t,Dh)
            cache["m"], cache["h"] = m, states
        # 2) b_t = softmax of m over the positions t may see, c̃_t = Σ b_t,t' h_t'
        T, t = h.size(1), m.size(-1)
        if see is None:  # causal; the T queries are the last T of the t positions
            rows = torch.arange(t - T, t, device=h.device).unsqueeze(1)  # (T,1)
            see = torch.arange(t, device=h.device) <= rows  # (T,t)
        b = masked_softmax(m.unsqueeze(-2), see.unsqueeze(-3))  # (B,H,T,t)
        summary = merge_heads(b @ states)  # (B,T,D)
        c = attended.context
        fused = self.proj(torch.cat([h, c, h * c, h * summary], -1))  # (B,T,D)
        return dataclasses.replace(attended, context=fused)
