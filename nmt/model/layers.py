"""Transformer building blocks: embeddings, self-attention with a cache, layers."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention.bias import causal_lower_right

from nmt.attention.base import AttentionOutput, Context, Memory
from nmt.attention.config import ATTENTION
from nmt.attention.fusion import BiDAFFusion
from nmt.attention.sdpa import scaled_dot_product
from nmt.model.config import ModelConfig


def sinusoids(length: int, dim: int) -> Tensor:
    """Sinusoidal position encodings (Vaswani et al. 2017, sec. 3.5) -> (length, dim)."""
    pos = torch.arange(length, dtype=torch.float32).unsqueeze(1)  # (L,1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    pe = torch.zeros(length, dim)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe


class Embedding(nn.Module):
    """Token embeddings scaled by sqrt(D), plus sinusoidal positions, then dropout."""

    def __init__(
        self, vocab: int, d_model: int, pad: int, max_positions: int, dropout: float, init: str
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
        self.register_buffer("positions", sinusoids(max_positions, d_model), persistent=False)
        self.dropout = nn.Dropout(dropout)

    def forward(self, embeds: Tensor, offset: int = 0) -> Tensor:
        """embeds (B,L,D) raw token embeddings (``self.tokens(ids)`` or a mix of them)."""
        L = embeds.size(1)
        return self.dropout(embeds * self.scale + self.positions[offset : offset + L])


class SelfAttention(nn.Module):
    """Multi-head self-attention through PyTorch's fused kernel, with an optional
    key/value cache for incremental decoding (one step costs O(t), not O(t²))."""

    def __init__(self, d_model: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """x (B,L,D) -> per-head queries, keys, values, each (B,H,L,Dh)."""
        B, L, D = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        return q, k, v

    def query(self, x: Tensor) -> Tensor:
        """Queries only (the first D rows of ``qkv``): x (B,L,D) -> (B,H,L,Dh)."""
        B, L, D = x.shape
        q = F.linear(x, self.qkv.weight[:D], self.qkv.bias[:D])  # (B,L,D)
        return q.view(B, L, self.heads, D // self.heads).transpose(1, 2)

    def attend(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, causal: bool = False
    ) -> Tensor:
        """q (B,H,L,Dh) against k, v (B,H,t,Dh); ``mask`` an additive bias or boolean
        (True = attend) broadcastable to (B,H,L,t) -> (B,L,D)."""
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
        q, k, v = self.project(x)  # 3 x (B,H,L,Dh)
        if cache is not None:
            k, v = extend_cache(cache, k, v)  # (B,H,total,Dh): cached keys, then the new
            new, total = x.size(1), k.size(2)
            if causal and new < total:
                # The new queries are the last positions: each sees every cached key and
                # the new ones up to itself. One query (a search step) needs no mask;
                # more need the causal mask aligned to the lower right, not is_causal's
                # top left.
                bias, causal = (None if new == 1 else causal_lower_right(new, total)), False
        return self.attend(q, k, v, bias, causal)


# Incremental decoding keeps, per decoder layer (and stream), each sub-module's own
# state under the sub-module's name (fairseq's incremental state, keyed by module):
# {"self_attn": {"key", "value"}, "fusion": {"m", "h"}}.
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
        self.self_attn = SelfAttention(cfg.d_model, cfg.heads, cfg.dropout)
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
        self.self_attn = SelfAttention(cfg.d_model, cfg.heads, cfg.dropout)
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
        attended = self.cross_attn(h, memory, ctx)
        if self.fusion is not None:
            history = own(cache, "fusion")
            attended = self.fusion(h, attended, self.cross_attn, memory, ctx, see, history)
        return self.feed_forward(x + self.dropout(attended.context)), attended

    def feed_forward(self, x: Tensor) -> Tensor:
        """The last sub-layer: x (B,T,D) -> x + drop(FFN(LN(x)))."""
        return x + self.dropout(self.ffn(self.ffn_norm(x)))
