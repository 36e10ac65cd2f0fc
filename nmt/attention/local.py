"""Local attention (Luong, Pham, Manning 2015, sec. 3.2): local_m and local_p.

Each query t attends only to the window [round(p_t) − w, round(p_t) + w] of
real source positions around a centre p_t. The two variants differ in p_t.

Two exact computations of the same result:

- ``dense``: scores over all S positions, masked to the window — O(T·S).
- ``windowed``: queries are grouped into blocks of at most C = W = 2w+1; each
  block gathers the band of keys its windows span and scores only that band —
  O(T·W) time and memory. local_m's centres move steadily, so runs of C
  consecutive queries make narrow bands; local_p's predicted centres may come in
  any order and cluster, so its queries are grouped by the tile of C source
  positions their window starts in (bands of C + W − 1 keys, at most T/C blocks
  plus one per occupied tile). ``path: auto`` takes the bands whenever their
  work is a margin below the dense path's (see ``BAND_GAIN``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.attention.base import (
    Attended,
    CrossAttention,
    Memory,
    masked_softmax,
)
from nmt.attention.config import LocalConfig, LocalMConfig, LocalPConfig
from nmt.attention.gaussian import gaussian_window

# ``auto`` uses the windowed path when its block slots × band length are at most
# T·S / BAND_GAIN; above that the dense kernel's fewer, larger matmuls win
# (benchmarks/attention_scaling.py).
BAND_GAIN = 4


def rows(x: Tensor) -> Tensor:
    """(B,H,L,Dh) heads of a (B,L,H·Dh) projection -> its (B·L·H, Dh) rows; row
    (b·L + l)·H + h is head h at position l (a view, no copy, for a projection)."""
    B, H, L, Dh = x.shape
    return x.transpose(1, 2).reshape(B * L * H, Dh)


class Centers(NamedTuple):
    """Local attention's extra output, for the plots: the centres p_t, (B,Hc,T)."""

    centers: Tensor


class Blocks(NamedTuple):
    """Where the windowed path puts each query, and the band of keys of each block."""

    slot: Tensor | None  # (B,Hc,T) each query's place among the n·C slots; None: its index
    start: Tensor  # (B,Hc,n) first source position of each block's band
    length: int  # L: keys in every band


class LocalAttention(CrossAttention):
    """Shared machinery; subclasses provide the centres p_t."""

    monotone = False  # whether p_t never decreases along t (then runs of queries block well)

    def __init__(self, cfg: LocalConfig, d_model: int, heads: int, dropout: float) -> None:
        super().__init__(cfg, d_model, heads, dropout)
        self.window = cfg.window
        self.width = 2 * cfg.window + 1  # W

    def centers(self, query: Tensor, memory: Memory, positions: Tensor) -> Tensor:
        """Real-valued p_t, (B,H,T) or (B,1,T) when shared by all heads."""
        raise NotImplementedError

    def window_softmax(self, scores: Tensor, mask: Tensor, pos: Tensor, p: Tensor) -> Tensor:
        """The weights over each query's window: ``mask`` (B,Hc,…,Q,K) True inside it;
        local_m: the softmax over the window (eq. 7)."""
        return masked_softmax(scores, mask)

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
        if not need_weights:
            return Attended(out)
        return Attended(out, weights, Centers(p))

    def _try_windowed(
        self, q: Tensor, memory: Memory, p: Tensor, lo: Tensor, need_weights: bool
    ) -> tuple[Tensor | None, Tensor | None]:
        """The windowed path, or (None, None) where the bands would not pay off."""
        T, S = q.size(2), memory.key.size(2)
        blocks = self._consecutive_blocks(lo) if self.monotone else self._tiled_blocks(lo)
        slots = blocks.start.size(-1) * self.width  # n·C
        if blocks.length >= S or (
            self.cfg.path == "auto" and slots * blocks.length * BAND_GAIN > T * S
        ):
            return None, None
        return self._windowed(q, memory, p, lo, blocks, need_weights)

    # 1) the window mask (and local_p's Gaussian), for any layout of source positions
    def _weights(
        self, scores: Tensor, pos: Tensor, p: Tensor, lo: Tensor, lengths: Tensor
    ) -> Tensor:
        """scores (B,H,…,Q,K); pos (…,K) or broadcastable source positions;
        p, lo (B,Hc,…,Q); lengths (B,) -> attention weights (B,H,…,Q,K)."""
        extra = (1,) * (scores.dim() - 1)
        real = (pos >= 0) & (pos < lengths.view(-1, *extra))
        lo = lo.unsqueeze(-1)  # (B,Hc,…,Q,1)
        mask = (pos >= lo) & (pos < lo + self.width) & real  # (B,Hc,…,Q,K)
        return self.window_softmax(scores, mask, pos, p)

    # 2a) the dense path: every source position, masked to the window
    def _dense(self, q: Tensor, memory: Memory, p: Tensor, lo: Tensor) -> tuple[Tensor, Tensor]:
        S = memory.key.size(2)
        pos = torch.arange(S, device=q.device)  # (S,)
        weights = self._weights(self.score(q, memory.key), pos, p, lo, memory.lengths)
        return self.dropout(weights) @ memory.value, weights  # (B,H,T,Dh), (B,H,T,S)

    # 2b) the windowed path: blocks of C queries against the band of keys they span
    def _consecutive_blocks(self, lo: Tensor) -> Blocks:
        """Runs of C consecutive queries: for centres that move steadily (local_m) each
        band is W plus the block's spread of centres."""
        C, T = self.width, lo.size(-1)
        n = math.ceil(T / C)
        padded = torch.cat([lo, lo[..., -1:].expand(*lo.shape[:-1], n * C - T)], -1)
        per_block = padded.view(*lo.shape[:-1], n, C)  # (B,Hc,n,C)
        start = per_block.min(-1).values  # (B,Hc,n)
        length = int((per_block.max(-1).values - start).max()) + self.width
        return Blocks(None, start, length)  # query t sits in slot t: no gathers

    def _tiled_blocks(self, lo: Tensor) -> Blocks:
        """For centres in any order (local_p): cut the source into tiles of C positions
        and group the queries whose window starts in the same tile, at most C to a
        block. Every band is then C + W − 1 keys, however the centres cluster, and
        there are at most T/C blocks plus one per occupied tile."""
        C, T = self.width, lo.size(-1)
        lo_sorted, order = lo.sort(-1)  # (B,Hc,T)
        tile = torch.div(lo_sorted, C, rounding_mode="floor")
        index = torch.arange(T, device=lo.device)
        first = torch.ones_like(tile, dtype=torch.bool)  # first query of its tile
        first[..., 1:] = tile[..., 1:] != tile[..., :-1]
        rank = index - torch.where(first, index, 0).cummax(-1).values  # rank in its tile
        block = (rank % C == 0).cumsum(-1) - 1  # (B,Hc,T)
        n = int(block.max()) + 1
        slot = torch.empty_like(order).scatter_(-1, order, block * C + rank % C)
        start = torch.zeros(*lo.shape[:-1], n, dtype=lo.dtype, device=lo.device)
        start.scatter_(-1, block, tile * C)  # (B,Hc,n); a block's queries share a tile
        return Blocks(slot, start, C + self.width - 1)

    def _windowed(
        self,
        q: Tensor,
        memory: Memory,
        p: Tensor,
        lo: Tensor,
        blocks: Blocks,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:
        B, H, T, Dh = q.shape
        S, C, L = memory.key.size(2), self.width, blocks.length
        n, Hc = blocks.start.size(-1), p.size(1)
        b = torch.arange(B, device=q.device).view(B, 1, 1)
        h = torch.arange(H, device=q.device).view(1, H, 1)
        # each slot's query, centre and window; an empty slot gets no window (lo past S)
        pb = self._to_slots(p, blocks.slot, n * C, 0.0).view(B, Hc, n, C)
        lob = self._to_slots(lo, blocks.slot, n * C, S + C).view(B, Hc, n, C)
        if blocks.slot is None:  # consecutive blocks: slot t holds query t
            qb = F.pad(q, (0, 0, 0, n * C - T))  # (B,H,n·C,Dh)
        else:  # an empty slot reads query 0
            queries = torch.arange(T, device=q.device).expand(B, Hc, T)
            query_of_slot = self._to_slots(queries, blocks.slot, n * C, 0)  # (B,Hc,n·C)
            qb = rows(q).index_select(0, ((b * T + query_of_slot) * H + h).view(-1))
        # the band of keys and values of each block
        pos = blocks.start.unsqueeze(-1) + torch.arange(L, device=q.device)  # (B,Hc,n,L)
        band = ((b.unsqueeze(-1) * S + pos.clamp(0, S - 1)) * H + h.unsqueeze(-1)).view(-1)
        kb = rows(memory.key).index_select(0, band).view(B, H, n, L, Dh)
        vb = rows(memory.value).index_select(0, band).view(B, H, n, L, Dh)
        weights = self._weights(
            self.score(qb.view(B, H, n, C, Dh), kb), pos.unsqueeze(-2), pb, lob, memory.lengths
        )  # (B,H,n,C,L)
        ctx = self.dropout(weights) @ vb  # (B,H,n,C,Dh)
        if blocks.slot is None:
            ctx = ctx.view(B, H, n * C, Dh)[:, :, :T]
        else:
            back = ((b * H + h) * (n * C) + blocks.slot).transpose(1, 2)  # (B,T,H)
            ctx = ctx.view(-1, Dh).index_select(0, back.reshape(-1))
            ctx = ctx.view(B, T, H, Dh).transpose(1, 2)  # (B,H,T,Dh)
        if not need_weights:
            return ctx, None
        full = torch.zeros(B, H, n * C, S, dtype=weights.dtype, device=q.device)
        band_index = pos.clamp(0, S - 1).unsqueeze(-2).expand(B, H, n, C, L)
        band_index = band_index.reshape(B, H, n * C, L)
        full.scatter_add_(-1, band_index, weights.reshape(B, H, n * C, L))
        if blocks.slot is None:
            return ctx, full[:, :, :T]
        return ctx, full.gather(2, blocks.slot.unsqueeze(-1).expand(B, H, T, S))  # (B,H,T,S)

    @staticmethod
    def _to_slots(x: Tensor, slot: Tensor | None, slots: int, fill: float) -> Tensor:
        """Per-query values (B,Hc,T) -> per-slot values (B,Hc,slots), ``fill`` where empty."""
        if slot is None:
            return F.pad(x, (0, slots - x.size(-1)), value=fill)
        return x.new_full((*x.shape[:-1], slots), fill).scatter(-1, slot, x)


class LocalMonotonicAttention(LocalAttention):
    """local-m (Luong et al. 2015, sec. 3.2): the aligned position is assumed known,
    p_t = t (or t / r with r the corpus mean target/source length ratio, so that
    languages with longer targets stay aligned), clamped to the real source so the
    window never falls off its end. Weights are the softmax over the window (eq. 7)."""

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


class LocalPredictiveAttention(LocalAttention):
    """local-p (Luong et al. 2015, sec. 3.2, eq. 9-10): the centre is predicted,
    p_t = S_b · sigmoid(v_pᵀ tanh(W_p h_t)), with S_b the real length of source b,
    per head or shared. A Gaussian with σ = w/2 favours positions near p_t:
    ``multiply`` scales the window softmax by exp(−(s − p_t)²/2σ²) (Luong, eq. 10);
    ``bias`` adds −(s − p_t)²/2σ² to the logits before the softmax (Yang et al. 2018).
    p_t stays real-valued: only the window bounds are rounded, so the gradient
    reaches the predictor through the Gaussian."""

    def __init__(self, cfg: LocalPConfig, d_model: int, heads: int, dropout: float) -> None:
        super().__init__(cfg, d_model, heads, dropout)
        self.center_proj = nn.Linear(d_model, d_model)  # W_p
        self.center_v = nn.Parameter(torch.randn(heads if cfg.per_head else 1, d_model) * 0.02)
        self.sigma = max(cfg.window / 2, 0.5)  # σ = w/2 (kept positive for w = 0)
        self.normalised = cfg.gaussian == "bias"

    def centers(self, query: Tensor, memory: Memory, positions: Tensor) -> Tensor:
        hidden = torch.tanh(self.center_proj(query))  # (B,T,D)
        # (B,T,Hc), then a transposed view, so the gradient reaching tanh is contiguous
        # (einsum's "btd,hd->bht" handed it back transposed; the gain: commit aec5e83)
        logits = F.linear(hidden, self.center_v).transpose(1, 2)  # (B,Hc,T)
        return memory.lengths.to(query.dtype).view(-1, 1, 1) * torch.sigmoid(logits)

    def window_softmax(self, scores: Tensor, mask: Tensor, pos: Tensor, p: Tensor) -> Tensor:
        return gaussian_window(scores, p, pos, mask, self.sigma, self.cfg.gaussian == "multiply")
