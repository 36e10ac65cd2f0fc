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
over real source positions, per head, with every term of the score (the
trilinear score's w_qᵀq, constant over source positions, differs between
target positions). A linear layer maps the 4·D fusion back
to D. Cost: one extra T × S score matrix per layer (whatever the variant
attends to) and a T × T softmax.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor, nn

from nmt.attention.base import Attended, CrossAttention, Memory, masked_softmax


class BiDAFFusion(nn.Module):
    """A cross-attention wrapped so that its context becomes
    Linear([h; c; h∘c; h∘c̃]); see the module docstring.

    It keeps the cross-attention contract (``project_memory``, ``forward`` ->
    :class:`Attended`, ``start_update``, ``extra_loss``, all the wrapped variant's)
    and adds two keywords to ``forward`` that only a reader of target positions
    needs: ``see`` and ``history``.
    """

    def __init__(self, attn: CrossAttention, d_model: int) -> None:
        super().__init__()
        self.attn = attn
        self.proj = nn.Linear(4 * d_model, d_model)

    def project_memory(self, memory: Tensor, src_mask: Tensor) -> Memory:
        return self.attn.project_memory(memory, src_mask)

    def start_update(self, step: int) -> None:
        self.attn.start_update(step)

    def extra_loss(
        self, records: list[Attended], reward: Tensor, tgt_mask: Tensor
    ) -> tuple[Tensor | None, dict[str, float]]:
        return self.attn.extra_loss(records, reward, tgt_mask)

    def forward(
        self,
        h: Tensor,
        memory: Memory,
        src_mask: Tensor,
        positions: Tensor,
        need_weights: bool = False,
        see: Tensor | None = None,
        history: dict[str, Tensor] | None = None,
    ) -> Attended:
        """h (B,T,D) the normed decoder states (the cross-attention's queries),
        src_mask (B,1,S) -> the wrapped variant's :class:`Attended` with the fused
        context (B,T,D). ``see`` (B,T,t) which target positions each query may
        summarise (None: causal); ``history`` keeps m and h of earlier positions
        between incremental decoding steps (None in training)."""
        attended = self.attn(h, memory, src_mask, positions, need_weights)
        attn = self.attn
        # 1) m_t = max over real source positions of the score, per head
        q = attn.split(attn.q_proj(h))  # (B,H,T,Dh)
        scores = attn.score.full(q, memory.key)  # (B,H,T,S)
        mask = src_mask.unsqueeze(1)  # (B,1,1,S)
        m = scores.masked_fill(~mask, torch.finfo(scores.dtype).min).amax(-1)  # (B,H,T)
        states = attn.split(h)  # (B,H,T,Dh)
        if history is not None:
            if "m" in history:
                m = torch.cat([history["m"], m], -1)  # (B,H,t)
                states = torch.cat([history["h"], states], 2)  # (B,H,t,Dh)
            history["m"], history["h"] = m, states
        # 2) b_t = softmax of m over the positions t may see, c̃_t = Σ b_t,t' h_t'
        T, t = h.size(1), m.size(-1)
        if see is None:  # causal; the T queries are the last T of the t positions
            rows = torch.arange(t - T, t, device=h.device).unsqueeze(1)  # (T,1)
            see = torch.arange(t, device=h.device) <= rows  # (T,t)
        b = masked_softmax(m.unsqueeze(-2), see.unsqueeze(-3))  # (B,H,T,t)
        summary = attn.merge(b @ states)  # (B,T,D)
        c = attended.context
        fused = self.proj(torch.cat([h, c, h * c, h * summary], -1))  # (B,T,D)
        return dataclasses.replace(attended, context=fused)
