"""XLNet's two-stream self-attention as a translation decoder (Yang et al. 2019, sec. 2.3).

Two streams share every weight of every layer:

- the **content stream** h is today's decoder: position p holds target input
  p (BOS, y_1, y_2, …) and attends to the content of positions no later than p
  in the factorisation order, itself included (the paper's content mask);
- the **query stream** g makes the predictions. Query j predicts the target
  token at position j + 1: it starts from a learned vector plus the position
  encoding of j + 1 — where, not what — and attends to the content of
  positions strictly before j + 1 in the order (the query mask), never to the
  token it predicts.

``order: left_to_right`` is the usual order, and then both masks are causal.
``order: random`` draws a factorisation order per sentence at every training
step: BOS first, the sentence's real slots in a random order, then its padding
slots, which are also masked as keys in both streams, so a sentence's outputs
do not depend on how much padding its batch gives it; the query that predicts
end-of-sentence (it has no content slot of its own) comes after every real
slot. Validation and decoding stay left to right. The content
stream's last layer is not computed: no query reads it (its keys and values,
from that layer's input, are).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from nmt.attention import Attended
from nmt.model.config import ModelConfig
from nmt.model.decoder import DECODERS, DecoderStack, DecoderState
from nmt.model.layers import Embedding, extend_cache


def random_order(real: Tensor) -> tuple[Tensor, Tensor]:
    """Ranks in a random factorisation order of target inputs whose real slots are
    ``real`` (B,T): content positions (B,T) and queries (B,T), where query j predicts
    position j + 1. BOS ranks first, padding after every real slot in position order,
    so the query of a sentence's last real slot (it predicts EOS) takes the rank of
    its first padding slot (or T): after every real slot."""
    B, T = real.shape
    key = torch.rand(B, T, device=real.device)  # (B,T) a random order of the real slots
    key = torch.where(real, key, 1.0 + torch.arange(T, device=real.device))  # padding last
    key[:, 0] = -1.0  # BOS first
    rank = key.argsort(-1).argsort(-1)  # (B,T) a permutation
    after = torch.full((B, 1), T, dtype=rank.dtype, device=real.device)
    return rank, torch.cat([rank[:, 1:], after], 1)


@DECODERS.register("two_stream")
class TwoStreamDecoder(DecoderStack):
    """See the module docstring."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.query_init = nn.Parameter(torch.randn(cfg.d_model) * cfg.d_model**-0.5)  # w

    def forward(
        self,
        embeds: Tensor,
        embedding: Embedding,
        state: DecoderState,
        need_weights: bool,
        tgt_mask: Tensor | None = None,
    ) -> tuple[Tensor, list[list[Attended]]]:
        B, T, _ = embeds.shape
        off, device = state.offset, embeds.device
        positions = torch.arange(off, off + T, device=device)  # (T,) decoding steps
        h = embedding(embeds, offset=off)  # (B,T,D) content
        g = embedding(self.query_init.expand(B, T, -1), offset=off + 1)  # (B,T,D) query
        # 1) the masks: True = may attend; None = plainly causal (fusion)
        content_see = query_see = fused_see = None
        attn_content = attn_query = None
        causal = False  # the fused kernel's own causal mask, for a square left-to-right pass
        if self.training and self.cfg.decoder.order == "random" and state.caches is None:
            # (B,T) query j is real iff slot j is
            real = tgt_mask if tgt_mask is not None else embeds.new_ones(B, T, dtype=torch.bool)
            rank, qrank = random_order(real)
            keys = real.unsqueeze(1)  # (B,1,T) padding is never a key
            content_see = (rank.unsqueeze(1) <= rank.unsqueeze(2)) & keys  # (B,T,T) [p, p']
            query_see = (rank.unsqueeze(1) < qrank.unsqueeze(2)) & keys  # (B,T,T) [j, p]
            fused_see = (qrank.unsqueeze(1) <= qrank.unsqueeze(2)) & keys  # (B,T,T) [j, j']
            attn_content, attn_query = content_see.unsqueeze(1), query_see.unsqueeze(1)
        elif off == 0:  # left to right: query j and content j both see content ≤ j
            causal = T > 1
        else:  # the new positions after a cache of ``off``
            rows = torch.arange(off, off + T, device=device).unsqueeze(1)  # (T,1)
            attn_content = attn_query = torch.arange(off + T, device=device) <= rows  # (T,t)
        # 2) the layers
        last = len(self) - 1
        records = []
        for i, layer in enumerate(self):
            cache = state.caches[i] if state.caches is not None else None
            memory = state.memories[i]
            q_h, k, v = layer.self_attn.project(layer.self_norm(h))  # 3 x (B,H,T,Dh)
            if cache is not None:
                k, v = extend_cache(cache, k, v)  # (B,H,t,Dh)
            q_g = layer.self_attn.query(layer.self_norm(g))  # (B,H,T,Dh)
            g = g + layer.dropout(layer.self_attn.attend(q_g, k, v, attn_query, causal))
            g, attended = layer.cross(
                g, memory, state.src_mask, positions, need_weights, fused_see, cache, "query_"
            )
            if need_weights:
                state.attended.append(attended)
            records.append([attended])
            if i < last:
                h = h + layer.dropout(layer.self_attn.attend(q_h, k, v, attn_content, causal))
                h, content = layer.cross(
                    h, memory, state.src_mask, positions, False, content_see, cache
                )
                records[-1].append(content)
        return g, records
