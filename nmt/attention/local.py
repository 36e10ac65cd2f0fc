"""Local attention (Luong, Pham, Manning 2015, sec. 3.2): local_m and local_p.

Each query t attends only to the window [round(p_t) − w, round(p_t) + w] of
real source positions around a centre p_t. The two variants differ in p_t.

Two exact computations of the same result:

- ``dense``: scores over all S positions, masked to the window — O(T·S).
- ``windowed``: queries are cut into blocks of C = W = 2w+1; each block gathers
  the band of keys its windows span (W + the spread of its centres) and scores
  only that band — O(T·W) time and memory when centres move steadily, as they
  do for local_m. ``path: auto`` takes the band whenever it is shorter than S
  by a margin (see ``BAND_GAIN``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

from nmt.attention.base import (
    ATTENTION,
    Attended,
    CrossAttention,
    Memory,
    ScoreName,
    masked_softmax,
)
from nmt.config import AttentionConfig, check

# ``auto`` uses the windowed path when the band is at most S / BAND_GAIN keys;
# below that the dense kernel's fewer, larger matmuls win (benchmarks/attention_scaling.py).
BAND_GAIN = 4


@dataclass(frozen=True)
class LocalConfig(AttentionConfig):
    window: int = 10  # w: the window spans 2w+1 source positions (Luong et al. used 10)
    score: ScoreName = "dot"
    path: Literal["auto", "windowed", "dense"] = "auto"

    def __post_init__(self) -> None:
        check(self.window >= 0, "window", "must be non-negative")


@dataclass(frozen=True)
class LocalMConfig(LocalConfig):
    kind: str = "local_m"
    # identity: p_t = t; length_ratio: p_t = t / ratio, where ratio is the mean
    # target/source length ratio (null: measured on the training data by the trainer)
    center: Literal["identity", "length_ratio"] = "identity"
    ratio: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check(self.ratio is None or self.ratio > 0, "ratio", "must be positive")


@dataclass(frozen=True)
class LocalPConfig(LocalConfig):
    kind: str = "local_p"
    gaussian: Literal["multiply", "bias"] = "multiply"
    per_head: bool = True  # one predicted centre per head, or one shared by all heads


class LocalAttention(CrossAttention):
    """Shared machinery; subclasses provide the centres p_t."""

    monotone = False  # whether p_t never decreases along t (then no sorting is needed)

    def __init__(self, cfg: LocalConfig, d_model: int, heads: int, dropout: float) -> None:
        super().__init__(cfg, d_model, heads, dropout)
        self.window = cfg.window
        self.width = 2 * cfg.window + 1  # W

    def centers(self, query: Tensor, memory: Memory, positions: Tensor) -> Tensor:
        """Real-valued p_t, (B,H,T) or (B,1,T) when shared by all heads."""
        raise NotImplementedError

    def gaussian(self, distance: Tensor) -> Tensor | None:
        """Log-domain Gaussian term for (s − p_t), or None (local_m has none)."""
        return None

    def forward(
        self,
        query: Tensor,
        memory: Memory,
        src_mask: Tensor,
        positions: Tensor,
        need_weights: bool = False,
    ) -> Attended:
        q = self.split(self.q_proj(query))  # (B,H,T,Dh)
        p = self.centers(query, memory, positions)  # (B,Hc,T)
        lo = torch.round(p.detach()).long() - self.window  # (B,Hc,T) first window position
        ctx = weights = None
        if self.cfg.path != "dense":
            ctx, weights = self._try_windowed(q, memory, p, lo, need_weights)
        if ctx is None:
            ctx, weights = self._dense(q, memory, p, lo)
        out = self.out_proj(self.merge(ctx))
        return Attended(out, weights if need_weights else None, p if need_weights else None)

    def _try_windowed(
        self, q: Tensor, memory: Memory, p: Tensor, lo: Tensor, need_weights: bool
    ) -> tuple[Tensor | None, Tensor | None]:
        """The windowed path, or (None, None) where the band would not pay off.

        Predicted centres need not move monotonically, so the queries are first
        sorted by centre: each block of C queries then has neighbouring windows
        and a narrow band; the outputs are put back in query order afterwards.
        """
        B, H, T, Dh = q.shape
        order = None if self.monotone else lo.argsort(-1)  # (B,Hc,T)
        if order is not None:
            p, lo = p.gather(-1, order), lo.gather(-1, order)
            q = q.gather(2, order.unsqueeze(-1).expand(B, H, T, Dh))
        band = self._band(lo, memory.key.size(2))
        if band is None or (self.cfg.path == "auto" and band[1] * BAND_GAIN > memory.key.size(2)):
            return None, None
        ctx, weights = self._windowed(q, memory, p, lo, *band, need_weights)
        if order is not None:
            back = order.argsort(-1).unsqueeze(-1)  # (B,Hc,T,1) inverse permutation
            ctx = ctx.gather(2, back.expand(B, H, T, Dh))
            if weights is not None:
                weights = weights.gather(2, back.expand(B, H, T, weights.size(-1)))
        return ctx, weights

    # 1) the window mask and the Gaussian, for any layout of source positions
    def _weights(
        self, scores: Tensor, pos: Tensor, p: Tensor, lo: Tensor, lengths: Tensor
    ) -> Tensor:
        """scores (B,H,…,Q,K); pos (…,K) or broadcastable source positions;
        p, lo (B,Hc,…,Q); lengths (B,) -> attention weights (B,H,…,Q,K)."""
        offset = pos - lo.unsqueeze(-1)  # (B,Hc,…,Q,K)
        extra = (1,) * (offset.dim() - 1)
        real = (pos >= 0) & (pos < lengths.view(-1, *extra))
        mask = (offset >= 0) & (offset < self.width) & real
        g = self.gaussian(pos.to(p.dtype) - p.unsqueeze(-1))  # (B,Hc,…,Q,K) or None
        if g is not None and self.cfg.gaussian == "bias":
            scores = scores + g  # Yang et al. 2018, eq. 4: renormalised by the softmax
        weights = masked_softmax(scores, mask)
        if g is not None and self.cfg.gaussian == "multiply":
            weights = weights * torch.exp(g)  # Luong et al. 2015, eq. 10: no renormalisation
        return weights

    # 2a) the dense path: every source position, masked to the window
    def _dense(self, q: Tensor, memory: Memory, p: Tensor, lo: Tensor) -> tuple[Tensor, Tensor]:
        S = memory.key.size(2)
        pos = torch.arange(S, device=q.device)  # (S,)
        weights = self._weights(self.score(q, memory.key), pos, p, lo, memory.lengths)
        return self.dropout(weights) @ memory.value, weights  # (B,H,T,Dh), (B,H,T,S)

    # 2b) the windowed path: blocks of C queries against the band of keys they span
    def _band(self, lo: Tensor, S: int) -> tuple[Tensor, int] | None:
        """Block starts (B,Hc,n) and band length L; None if the band would cover S."""
        C = self.width
        T = lo.size(-1)
        n = math.ceil(T / C)
        padded = torch.cat([lo, lo[..., -1:].expand(*lo.shape[:-1], n * C - T)], -1)
        blocks = padded.view(*lo.shape[:-1], n, C)  # (B,Hc,n,C)
        start = blocks.min(-1).values  # (B,Hc,n)
        L = int((blocks.max(-1).values - start).max()) + self.width
        return (start, L) if L < S else None

    def _windowed(
        self,
        q: Tensor,
        memory: Memory,
        p: Tensor,
        lo: Tensor,
        start: Tensor,
        L: int,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:
        B, H, T, Dh = q.shape
        S, C, n = memory.key.size(2), self.width, start.size(-1)
        pad = n * C - T
        qb = torch.nn.functional.pad(q, (0, 0, 0, pad)).view(B, H, n, C, Dh)  # (B,H,n,C,Dh)
        p = torch.nn.functional.pad(p, (0, pad), value=0.0).view(*p.shape[:2], n, C)
        lo = torch.nn.functional.pad(lo, (0, pad), value=0).view(*lo.shape[:2], n, C)
        pos = start.unsqueeze(-1) + torch.arange(L, device=q.device)  # (B,Hc,n,L)
        index = pos.clamp(0, S - 1).expand(B, H, n, L).reshape(B, H, n * L, 1)
        kb = memory.key.gather(2, index.expand(-1, -1, -1, Dh)).view(B, H, n, L, Dh)
        vb = memory.value.gather(2, index.expand(-1, -1, -1, Dh)).view(B, H, n, L, Dh)
        weights = self._weights(self.score(qb, kb), pos.unsqueeze(-2), p, lo, memory.lengths)
        ctx = (self.dropout(weights) @ vb).view(B, H, n * C, Dh)[:, :, :T]  # (B,H,T,Dh)
        if not need_weights:
            return ctx, None
        full = torch.zeros(B, H, n * C, S, dtype=weights.dtype, device=q.device)
        band_index = index.view(B, H, n, 1, L).expand(B, H, n, C, L).reshape(B, H, n * C, L)
        full.scatter_add_(-1, band_index, weights.reshape(B, H, n * C, L))
        return ctx, full[:, :, :T]  # (B,H,T,S)


@ATTENTION.register("local_m")
class LocalMonotonicAttention(LocalAttention):
    """local-m (Luong et al. 2015, sec. 3.2): the aligned position is assumed known,
    p_t = t (or t / r with r the corpus mean target/source length ratio, so that
    languages with longer targets stay aligned), clamped to the real source so the
    window never falls off its end. Weights are the softmax over the window (eq. 7)."""

    config_class = LocalMConfig
    monotone = True

    def __init__(self, cfg: LocalMConfig, d_model: int, heads: int, dropout: float) -> None:
        super().__init__(cfg, d_model, heads, dropout)
        if cfg.center == "length_ratio" and cfg.ratio is None:
            raise ValueError("local_m length_ratio needs a ratio (the trainer measures it)")

    def centers(self, query: Tensor, memory: Memory, positions: Tensor) -> Tensor:
        p = positions.to(query.dtype)  # (T,)
        if self.cfg.center == "length_ratio":
            p = p / self.cfg.ratio
        last = (memory.lengths - 1).clamp(min=0).to(query.dtype)  # (B,)
        return torch.minimum(p.view(1, 1, -1), last.view(-1, 1, 1))  # (B,1,T)


@ATTENTION.register("local_p")
class LocalPredictiveAttention(LocalAttention):
    """local-p (Luong et al. 2015, sec. 3.2, eq. 9-10): the centre is predicted,
    p_t = S_b · sigmoid(v_pᵀ tanh(W_p h_t)), with S_b the real length of source b,
    per head or shared. A Gaussian with σ = w/2 favours positions near p_t:
    ``multiply`` scales the window softmax by exp(−(s − p_t)²/2σ²) (Luong, eq. 10);
    ``bias`` adds −(s − p_t)²/2σ² to the logits before the softmax (Yang et al. 2018).
    p_t stays real-valued: only the window bounds are rounded, so the gradient
    reaches the predictor through the Gaussian."""

    config_class = LocalPConfig

    def __init__(self, cfg: LocalPConfig, d_model: int, heads: int, dropout: float) -> None:
        super().__init__(cfg, d_model, heads, dropout)
        self.center_proj = nn.Linear(d_model, d_model)  # W_p
        self.center_v = nn.Parameter(torch.randn(heads if cfg.per_head else 1, d_model) * 0.02)
        self.sigma = max(cfg.window / 2, 0.5)  # σ = w/2 (kept positive for w = 0)
        self.normalised = cfg.gaussian == "bias"

    def centers(self, query: Tensor, memory: Memory, positions: Tensor) -> Tensor:
        hidden = torch.tanh(self.center_proj(query))  # (B,T,D)
        logits = torch.einsum("btd,hd->bht", hidden, self.center_v)  # (B,Hc,T)
        return memory.lengths.to(query.dtype).view(-1, 1, 1) * torch.sigmoid(logits)

    def gaussian(self, distance: Tensor) -> Tensor:
        return -(distance**2) / (2 * self.sigma**2)
