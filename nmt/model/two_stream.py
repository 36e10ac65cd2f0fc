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

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from nmt.attention.base import AttentionOutput, Context, Memory
from nmt.model.decoder import DecoderStack, DecoderState
from nmt.model.layers import Caches, DecoderLayer, Embedding, extend_cache, own
from nmt.setup.model import ModelConfig


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


@dataclass(frozen=True)
class Masks:
    """Who may read whom (True = may attend) in one pass; None = plainly causal."""

    # (B,1,T,t) in random order, (T,t) after a cache: broadcast over batch and heads
    content: Tensor | None = None  # [p, p']: content reads content
    query: Tensor | None = None  # [j, p]: queries read content
    fusion_content: Tensor | None = None  # (B,T,t): fusion summaries of the content stream
    fusion_query: Tensor | None = None  # (B,T,t): fusion summaries of the query stream
    causal: bool = False  # the fused kernel's own causal mask (a square left-to-right pass)


class TwoStreamLayer(DecoderLayer):
    """One layer run on both streams with shared weights (the same sub-modules, so
    parameter names stay those of :class:`DecoderLayer`)."""

    def streams(
        self,
        h: Tensor,
        g: Tensor,
        memory: Memory,
        ctx: Context,
        masks: Masks,
        caches: tuple[Caches, Caches] | None,
        content: bool,
    ) -> tuple[Tensor, Tensor, list[AttentionOutput]]:
        """Content h and query g (B,T,D) -> the next h and g, and what the
        cross-attention returned (query stream first). ``caches``: the layer's state
        of earlier steps for the content stream (its self-attention's keys and values,
        shared by both streams, and its fusion's history) and for the query stream
        (its fusion's history); ``content``: whether the content stream is computed
        (no query reads the last layer's)."""
        content_cache, query_cache = caches if caches is not None else (None, None)
        pos = ctx.positions  # (T,) the content stream's; query j stands at j + 1
        q_h, k, v = self.self_attn.project(self.self_norm(h), pos)  # 3 x (B,H,T,Dh)
        if (self_cache := own(content_cache, "self_attn")) is not None:
            k, v = extend_cache(self_cache, k, v)  # (B,H,t,Dh)
        q_g = self.self_attn.query(self.self_norm(g), pos + 1)  # (B,H,T,Dh)
        g = g + self.dropout(self.self_attn.attend(q_g, k, v, masks.query, masks.causal, pos + 1))
        g, attended = self.cross_sublayer(g, memory, ctx, masks.fusion_query, query_cache)
        attention = [attended]
        if content:
            h = h + self.dropout(self.self_attn.attend(q_h, k, v, masks.content, masks.causal, pos))
            unweighed = dataclasses.replace(ctx, need_weights=False)
            h, attended = self.cross_sublayer(
                h, memory, unweighed, masks.fusion_content, content_cache
            )
            attention.append(attended)
        return h, g, attention


class TwoStreamDecoder(DecoderStack):
    """See the module docstring."""

    layer = TwoStreamLayer

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.query_init = nn.Parameter(torch.randn(cfg.d_model) * cfg.d_model**-0.5)  # w

    def new_caches(self) -> list[Caches]:
        """Per layer the content stream's cache, then per layer the query stream's
        (its fusion history; the two streams share the self-attention keys)."""
        return [{} for _ in range(2 * len(self))]

    def masks(self, B: int, T: int, offset: int, tgt_mask: Tensor | None, random: bool) -> Masks:
        """The attention masks of one pass over T positions after ``offset`` cached ones."""
        device = self.query_init.device
        if random:
            # (B,T) query j is real iff slot j is
            real = (
                tgt_mask
                if tgt_mask is not None
                else torch.ones(B, T, dtype=torch.bool, device=device)
            )
            rank, qrank = random_order(real)
            keys = real.unsqueeze(1)  # (B,1,T) padding is never a key
            content = (rank.unsqueeze(1) <= rank.unsqueeze(2)) & keys  # (B,T,T) [p, p']
            query = (rank.unsqueeze(1) < qrank.unsqueeze(2)) & keys  # (B,T,T) [j, p]
            fused = (qrank.unsqueeze(1) <= qrank.unsqueeze(2)) & keys  # (B,T,T) [j, j']
            return Masks(content.unsqueeze(1), query.unsqueeze(1), content, fused)
        if offset == 0:  # left to right: query j and content j both see content ≤ j
            return Masks(causal=T > 1)
        rows = torch.arange(offset, offset + T, device=device).unsqueeze(1)  # (T,1)
        see = torch.arange(offset + T, device=device) <= rows  # (T,t)
        return Masks(see, see)

    def forward(
        self,
        embeds: Tensor,
        embedding: Embedding,
        state: DecoderState,
        ctx: Context,
        tgt_mask: Tensor | None = None,
    ) -> tuple[Tensor, list[list[AttentionOutput]]]:
        B, T, _ = embeds.shape
        off = state.offset
        # one SHAPE offset per sequence for both streams: query t+1 stays content t's next
        draw = embedding.draw(B, embeds.device) if state.shift is None else state.shift
        h = embedding(embeds, offset=off, draw=draw)  # (B,T,D) content
        g = embedding(self.query_init.expand(B, T, -1), offset=off + 1, draw=draw)  # query
        random = self.training and self.cfg.decoder.order == "random" and state.caches is None
        masks = self.masks(B, T, off, tgt_mask, random)
        attention = []
        for i, layer in enumerate(self):
            caches = None
            if state.caches is not None:
                caches = (state.caches[i], state.caches[len(self) + i])
            h, g, calls = layer.streams(
                h, g, state.memories[i], ctx, masks, caches, content=i < len(self) - 1
            )
            attention.append(calls)
        return g, attention
