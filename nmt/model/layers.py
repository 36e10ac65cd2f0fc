"""Transformer building blocks: embeddings, self-attention with a cache, layers."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.attention.base import AttentionOutput, Context, Memory, key_bias
from nmt.attention.fusion import BiDAFFusion
from nmt.attention.sdpa import scaled_dot_product
from nmt.model.positions import scheme
from nmt.setup.attention import ATTENTION
from nmt.setup.model import ModelConfig, PositionsConfig


class Embedding(nn.Module):
    """Token embeddings scaled by sqrt(D), plus the absolute positions of
    ``model.positions`` (none for the schemes that act in attention), then dropout."""

    def __init__(
        self,
        vocab: int,
        d_model: int,
        pad: int,
        positions: PositionsConfig,
        max_positions: int,
        dropout: float,
        init: str,
    ) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, d_model, padding_idx=pad)
        if init == "xavier":
            nn.init.xavier_uniform_(self.tokens.weight)
        else:
            nn.init.normal_(self.tokens.weight, std=d_model**-0.5)
        with torch.no_grad():
            self.tokens.weight[pad].zero_()
        self.scale = math.sqrt(d_model)
        self.positions = scheme(positions).embeddings(positions, max_positions, d_model)
        self.shift = positions.shift
        self.dropout = nn.Dropout(dropout)

    def draw(self, batch: int, device: torch.device) -> Tensor | None:
        """SHAPE's random offsets (B,1) in 0..shift, one per sequence (Kiyono et al.
        2021), in training; None where there are none (decoding, or no shift)."""
        if not (self.training and self.shift > 0):
            return None
        return torch.randint(0, self.shift + 1, (batch, 1), device=device)

    def forward(self, embeds: Tensor, offset: int = 0, draw: Tensor | None = None) -> Tensor:
        """embeds (B,L,D) raw token embeddings (``self.tokens(ids)`` or a mix of them)
        at positions offset..offset+L−1; in training, SHAPE's offsets ``draw`` (B,1)
        move them further: the caller's (a pair's tied draw:
        ``Transformer.tied_shift``), or, None, this call's own."""
        B, L, _ = embeds.shape
        if draw is None:
            draw = self.draw(B, embeds.device)
        start = offset if draw is None else offset + draw  # int or (B,1)
        x = embeds * self.scale
        added = self.positions(L, start)  # (L,D) or (B,L,D); None for relative schemes
        return self.dropout(x if added is None else x + added)


class SelfAttention(nn.Module):
    """Multi-head self-attention through PyTorch's fused kernel, with an optional
    key/value cache for incremental decoding (one step costs O(t), not O(t²)), and
    the positions of ``model.positions`` that act in attention (rotated queries and
    keys, or a bias on the scores: nmt.model.positions)."""

    def __init__(
        self, d_model: int, heads: int, dropout: float, positions: PositionsConfig
    ) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = dropout
        self.positions = scheme(positions).self_attention(positions, heads, d_model // heads)

    def project(self, x: Tensor, pos: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """x (B,L,D) at positions pos (L,) -> per-head queries, keys, values, each
        (B,H,L,Dh)."""
        B, L, D = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        return self.positions.rotate(q, pos), self.positions.rotate(k, pos), v

    def query(self, x: Tensor, pos: Tensor) -> Tensor:
        """Queries only (the first D rows of ``qkv``): x (B,L,D) at positions pos (L,)
        -> (B,H,L,Dh)."""
        B, L, D = x.shape
        q = F.linear(x, self.qkv.weight[:D], self.qkv.bias[:D])  # (B,L,D)
        return self.positions.rotate(q.view(B, L, self.heads, D // self.heads).transpose(1, 2), pos)

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None,
        causal: bool,
        pos: Tensor,
    ) -> Tensor:
        """q (B,H,L,Dh) at positions pos (L,) against k, v (B,H,t,Dh) at 0..t−1;
        ``mask`` an additive bias or boolean (True = attend) broadcastable to
        (B,H,L,t); ``causal``: the L queries are the last L of the t keys' sequence and
        each sees the keys up to its own -> (B,L,D)."""
        new, seen = q.size(2), k.size(2)
        extra = self.positions.bias(q, pos, seen)  # (B or 1,H,L,t) or None
        if extra is not None:
            mask, causal = with_bias(mask, causal, extra), False
        elif causal and new < seen:
            # The new queries of an incremental step after cached keys: one query (a
            # search step) needs no mask; more need the causal mask aligned to the
            # lower right, not is_causal's top left.
            mask = None if new == 1 else lower_right_causal(new, seen, q.device)
            causal = False
        p = self.dropout if self.training else 0.0
        ctx = scaled_dot_product(q, k, v, mask, causal, p)  # (B,H,L,Dh)
        B, H, L, Dh = ctx.shape
        return self.out_proj(ctx.transpose(1, 2).reshape(B, L, H * Dh))

    def forward(
        self,
        x: Tensor,
        bias: Tensor | None = None,
        causal: bool = False,
        cache: dict[str, Tensor] | None = None,
    ) -> Tensor:
        """x (B,L,D): the whole sequence, or with a ``cache`` the next L positions."""
        new = x.size(1)
        start = cache["key"].size(2) if cache is not None and "key" in cache else 0
        pos = torch.arange(start, start + new, device=x.device)  # (L,)
        q, k, v = self.project(x, pos)  # 3 x (B,H,L,Dh)
        if cache is not None:
            k, v = extend_cache(cache, k, v)  # (B,H,total,Dh): cached keys, then the new
        return self.attend(q, k, v, bias, causal, pos)


def lower_right_causal(L: int, t: int, device: torch.device) -> Tensor:
    """The causal rule when the L queries are the last L positions of the t keys'
    sequence: (L,t) boolean, True = attend. (torch.nn.attention.bias's
    causal_lower_right is the same rule, but importing it loads TorchDynamo: much of
    the start of a command that does not train, docs/benchmarks.md.)"""
    last = torch.arange(t - L, t, device=device).unsqueeze(-1)  # (L,1)
    return torch.arange(t, device=device) <= last  # (L,t)


def with_bias(mask: Tensor | None, causal: bool, extra: Tensor) -> Tensor:
    """One additive bias (…,H,L,t) from a key mask (additive, or boolean: True =
    attend), the causal rule (the L queries are the last L positions of the t keys'
    sequence) and the positions' ``extra``."""
    L, t = extra.shape[-2:]
    if causal:
        extra = extra + key_bias(lower_right_causal(L, t, extra.device), extra.dtype)
    if mask is None:
        return extra
    if mask.dtype == torch.bool:
        mask = key_bias(mask, extra.dtype)
    return extra + mask


# Incremental decoding keeps, per decoder layer (and stream), each sub-module's own
# state under the sub-module's name (fairseq's incremental state, keyed by module):
# {"self_attn": {"key", "value"}, "cross_attn": {...}, "fusion": {"m", "h"}}; the
# cross-attention's reaches it in its Context.
Caches = dict[str, dict[str, Tensor]]


def own(cache: Caches | None, module: str) -> dict[str, Tensor] | None:
    """The state of ``module`` within a layer's ``cache`` (None: not incremental)."""
    return None if cache is None else cache.setdefault(module, {})


def extend_cache(cache: dict[str, Tensor], k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
    """Append this step's keys/values (B,H,L,Dh) to the cache; return all of them."""
    if "key" in cache:
        k = torch.cat([cache["key"], k], dim=2)  # (B,H,t,Dh)
        v = torch.cat([cache["value"], v], dim=2)
    cache["key"], cache["value"] = k, v
    return k, v


class FeedForward(nn.Sequential):
    """Position-wise feed-forward network W2·dropout(relu(W1·x)) (Vaswani et al.
    2017, eq. 2, with dropout on its hidden layer)."""

    def __init__(self, d_model: int, ffn: int, dropout: float) -> None:
        super().__init__(
            nn.Linear(d_model, ffn), nn.ReLU(), nn.Dropout(dropout), nn.Linear(ffn, d_model)
        )


class EncoderLayer(nn.Module):
    """Pre-norm: x + drop(SelfAttn(LN(x))); x + drop(FFN(LN(x)))."""

    def __init__(self, cfg: ModelConfig, index: int) -> None:
        super().__init__()
        self.self_norm = nn.LayerNorm(cfg.d_model)
        self.self_attn = SelfAttention(cfg.d_model, cfg.heads, cfg.dropout, cfg.positions)
        self.ffn_norm = nn.LayerNorm(cfg.d_model)
        self.ffn = FeedForward(cfg.d_model, cfg.ffn, cfg.dropout)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor, bias: Tensor, keep: Tensor) -> Tensor:
        """x (B,S,D), bias (B,1,1,S) additive key mask, keep (B,S,1) True = real."""
        x = x + self.dropout(self.self_attn(self.self_norm(x), bias=bias))
        return x + self.dropout(self.ffn(self.ffn_norm(x)))


class DecoderLayer(nn.Module):
    """Pre-norm: causal self-attention, then the recipe's cross-attention (followed by
    BiDAF fusion under ``model.decoder.fusion: bidaf``), then FFN, each as
    x + drop(sublayer(LN(x)))."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_norm = nn.LayerNorm(cfg.d_model)
        self.self_attn = SelfAttention(cfg.d_model, cfg.heads, cfg.dropout, cfg.positions)
        self.cross_norm = nn.LayerNorm(cfg.d_model)
        a = cfg.attention
        self.cross_attn = ATTENTION.get(a.kind)(a, cfg.d_model, cfg.heads, cfg.dropout)
        fused = cfg.decoder.fusion == "bidaf"
        self.fusion = BiDAFFusion(self.cross_attn, cfg.d_model) if fused else None
        self.ffn_norm = nn.LayerNorm(cfg.d_model)
        self.ffn = FeedForward(cfg.d_model, cfg.ffn, cfg.dropout)
        self.dropout = nn.Dropout(cfg.dropout)

    def project_memory(self, memory: Tensor, src_mask: Tensor) -> Memory:
        """The encoder output (B,S,D) as this layer's cross-attention reads it."""
        return self.cross_attn.project_memory(memory, src_mask)

    def forward(
        self, x: Tensor, memory: Memory, ctx: Context, cache: Caches | None = None
    ) -> tuple[Tensor, AttentionOutput]:
        """x (B,T,D) -> (B,T,D) and what the cross-attention returned; ``cache`` holds
        each sub-module's state of earlier steps (incremental decoding)."""
        self_cache = own(cache, "self_attn")
        x = x + self.dropout(self.self_attn(self.self_norm(x), causal=True, cache=self_cache))
        return self.cross_sublayer(x, memory, ctx, None, cache)

    def cross_sublayer(
        self, x: Tensor, memory: Memory, ctx: Context, see: Tensor | None, cache: Caches | None
    ) -> tuple[Tensor, AttentionOutput]:
        """x + drop(cross-attention(LN(x))) (fused, if the layer fuses), then the
        feed-forward sub-layer; ``see`` (B,T,t) the target positions the fusion's
        queries may summarise (None: causal)."""
        h = self.cross_norm(x)
        if self.cross_attn.takes_state:  # its state between steps, kept in this layer's cache
            attended = self.cross_attn(h, memory, ctx, state=own(cache, "cross_attn"))
        else:
            attended = self.cross_attn(h, memory, ctx)
        if self.fusion is not None:
            history = own(cache, "fusion")
            attended = self.fusion(h, attended, self.cross_attn, memory, ctx, see, history)
        return self.feed_forward(x + self.dropout(attended.context)), attended

    def feed_forward(self, x: Tensor) -> Tensor:
        """The last sub-layer: x (B,T,D) -> x + drop(FFN(LN(x)))."""
        return x + self.dropout(self.ffn(self.ffn_norm(x)))
