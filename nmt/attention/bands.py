"""Local attention over bands of keys: the same weights as the dense path of
:mod:`nmt.attention.local`, in O(T·W) time and memory instead of O(T·S).

The dense path scores every query against all S source positions and masks all
but its window of W = 2w+1. Here queries are grouped into blocks of at most
C = W; each block gathers the band of keys its windows span and scores only that
band:

- :func:`consecutive_blocks`: runs of C consecutive queries. local_m's centres
  move steadily, so each band is W plus the block's spread of centres.
- :func:`tiled_blocks`: local_p's predicted centres may come in any order and
  cluster, so its queries are grouped by the tile of C source positions their
  window starts in: bands of C + W − 1 keys, at most T/C blocks plus one per
  occupied tile, however the centres fall.

Under ``torch.compile`` neither reads its block count or band length back to the
host, which would break the graph: they take the most there can be
(:func:`most_blocks`, :func:`band_length`). Eager mode measures them, since every
empty slot or longer band is work.

``model.attention.path`` switches it (``auto``: whenever the bands' work is a
margin below the dense path's, see :data:`BAND_GAIN`). It is a model key, not a
``train.kernels`` one, because it serves decoding too: translating a long input
is where it pays most.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.attention.base import Context, Memory, alibi_slopes

# ``auto`` uses the bands when their block slots × band length are at most
# T·S / BAND_GAIN; above that the dense path's fewer, larger matmuls win
# (benchmarks/attention_scaling.py, docs/benchmarks.md).
BAND_GAIN = 4


class Windowed(Protocol):
    """What the bands need of a local attention (nmt.attention.local)."""

    width: int  # W = 2w + 1
    heads: int
    monotone: bool  # whether p_t never decreases along t
    band_length: int | None  # monotone: the most keys W consecutive queries span
    score: nn.Module  # (B,H,*,Q,Dh) x (B,H,*,K,Dh) -> (B,H,*,Q,K)
    dropout: nn.Module

    def window_weights(
        self,
        scores: Tensor,
        pos: Tensor,
        p: Tensor,
        lo: Tensor,
        lengths: Tensor,
        allowed: Tensor | None = None,
    ) -> Tensor: ...


class Blocks(NamedTuple):
    """Where the banded path puts each query, and the band of keys of each block."""

    slot: Tensor | None  # (B,Hc,T) each query's place among the n·C slots; None: its index
    start: Tensor  # (B,Hc,n) first source position of each block's band
    length: int  # L: keys in every band


def rows(x: Tensor) -> Tensor:
    """(B,H,L,Dh) heads of a (B,L,H·Dh) projection -> its (B·L·H, Dh) rows; row
    (b·L + l)·H + h is head h at position l (a view, no copy, for a projection)."""
    B, H, L, Dh = x.shape
    return x.transpose(1, 2).reshape(B * L * H, Dh)


def consecutive_blocks(lo: Tensor, width: int, bound: int | None = None) -> Blocks:
    """lo (B,Hc,T) first window position of each query -> runs of C = ``width``
    consecutive queries and the band each spans; ``bound``: the most keys a run can
    span (:func:`band_length`), None to measure it."""
    C, T = width, lo.size(-1)
    n = math.ceil(T / C)
    padded = torch.cat([lo, lo[..., -1:].expand(*lo.shape[:-1], n * C - T)], -1)
    per_block = padded.view(*lo.shape[:-1], n, C)  # (B,Hc,n,C)
    start = per_block.min(-1).values  # (B,Hc,n)
    if torch.compiler.is_compiling() and bound is not None:  # no host read (module doc)
        length = bound
    else:
        length = int((per_block.max(-1).values - start).max()) + width
    return Blocks(None, start, length)  # query t sits in slot t: no gathers


def band_length(width: int, advance: float) -> int:
    """The most keys a run of C = W consecutive queries spans when each centre is at
    most ``advance`` past the one before: their rounded window starts lie within
    ⌊(C − 1)·advance⌋ + 1 of each other."""
    return math.floor((width - 1) * advance) + 1 + width


def tiled_blocks(lo: Tensor, width: int, sources: int) -> Blocks:
    """lo (B,Hc,T) over S = ``sources`` positions -> blocks of at most C = ``width``
    queries whose windows start in the same tile of C source positions; every band
    is C + W − 1 keys."""
    C, T = width, lo.size(-1)
    # a window that ends before position 0 or starts past S − 1 holds no key, so its
    # tile does not matter: clamped, lo falls in the tiles −1 … ⌊(S − 1)/C⌋
    lo = lo.clamp(1 - width, sources - 1)
    lo_sorted, order = lo.contiguous().sort(-1)  # (B,Hc,T); contiguous for searchsorted
    tile = torch.div(lo_sorted, C, rounding_mode="floor")
    index = torch.arange(T, device=lo.device)
    rank = index - torch.searchsorted(tile, tile)  # rank in its tile: after its first query
    block = (rank % C == 0).cumsum(-1) - 1  # (B,Hc,T)
    # compiled: the bound, with no host read (module doc); eager: the count
    n = most_blocks(T, C, sources) if torch.compiler.is_compiling() else int(block.max()) + 1
    slot = torch.empty_like(order).scatter_(-1, order, block * C + rank % C)
    start = torch.zeros(*lo.shape[:-1], n, dtype=lo.dtype, device=lo.device)
    start.scatter_(-1, block, tile * C)  # (B,Hc,n); a block's queries share a tile
    return Blocks(slot, start, C + width - 1)


def most_blocks(queries: int, width: int, sources: int) -> int:
    """The most blocks :func:`tiled_blocks` makes of T = ``queries`` queries: ⌊T/C⌋
    full ones and one part-filled block in each of the tiles −1 … ⌊(S − 1)/C⌋."""
    return min(queries, queries // width + (sources - 1) // width + 2)


def banded_attention(
    attn: Windowed,
    q: Tensor,
    memory: Memory,
    ctx: Context,
    p: Tensor,
    lo: Tensor,
    auto: bool,
) -> tuple[Tensor, Tensor | None] | None:
    """The context (B,H,T,Dh) and, when ``ctx`` asks, the weights (B,H,T,S) of
    ``attn`` for queries q (B,H,T,Dh), centres p and first window positions lo
    (B,Hc,T); or None where, under ``auto``, the bands would not pay off (or where
    they would span the whole source anyway)."""
    T, S, W = q.size(2), memory.key.size(2), attn.width
    if attn.monotone:
        blocks = consecutive_blocks(lo, W, attn.band_length)
    else:
        blocks = tiled_blocks(lo, W, S)
    slots = blocks.start.size(-1) * W  # n·C
    if blocks.length >= S or (auto and slots * blocks.length * BAND_GAIN > T * S):
        return None
    return _attend(attn, q, memory, ctx, p, lo, blocks)


def _attend(
    attn: Windowed,
    q: Tensor,
    memory: Memory,
    ctx: Context,
    p: Tensor,
    lo: Tensor,
    blocks: Blocks,
) -> tuple[Tensor, Tensor | None]:
    B, H, T, Dh = q.shape
    S, C, L = memory.key.size(2), attn.width, blocks.length
    n, Hc = blocks.start.size(-1), p.size(1)
    b = torch.arange(B, device=q.device).view(B, 1, 1)
    h = torch.arange(H, device=q.device).view(1, H, 1)
    # each slot's query, centre and window; an empty slot gets no window (lo past S)
    pb = _to_slots(p, blocks.slot, n * C, 0.0).view(B, Hc, n, C)
    lob = _to_slots(lo, blocks.slot, n * C, S + C).view(B, Hc, n, C)
    if blocks.slot is None:  # consecutive blocks: slot t holds query t
        qb = F.pad(q, (0, 0, 0, n * C - T))  # (B,H,n·C,Dh)
    else:  # an empty slot reads query 0
        queries = torch.arange(T, device=q.device).expand(B, Hc, T)
        query_of_slot = _to_slots(queries, blocks.slot, n * C, 0)  # (B,Hc,n·C)
        qb = rows(q).index_select(0, ((b * T + query_of_slot) * H + h).view(-1))
    # the band of keys and values of each block
    pos = blocks.start.unsqueeze(-1) + torch.arange(L, device=q.device)  # (B,Hc,n,L)
    band = ((b.unsqueeze(-1) * S + pos.clamp(0, S - 1)) * H + h.unsqueeze(-1)).view(-1)
    kb = rows(memory.key).index_select(0, band).view(B, H, n, L, Dh)
    vb = rows(memory.value).index_select(0, band).view(B, H, n, L, Dh)
    scores = attn.score(qb.view(B, H, n, C, Dh), kb)  # (B,H,n,C,L)
    # a mask per query: a sentence-group layer's, each query's own sentence (with one
    # query, any mask is one)
    grouped = memory.mask.size(1) == T
    if ctx.cross_bias is not None or grouped:  # each slot's query
        slot_queries = torch.arange(T, device=q.device).expand(B, Hc, T)
        of_slot = _to_slots(slot_queries, blocks.slot, n * C, 0).view(B, Hc, n, C)
    if ctx.cross_bias is not None:  # cross_alibi, each slot's query against its band
        slopes = alibi_slopes(H).to(q.device, scores.dtype).view(1, H, 1, 1, 1)
        scores = scores + ctx.cross_bias.at(slopes, of_slot, pos)  # (B,H,n,C,L), Hc = 1 or H
    allowed = None
    if grouped:
        cell = (of_slot.unsqueeze(-1) * S + pos.clamp(0, S - 1).unsqueeze(-2)).flatten(1)
        allowed = memory.mask.flatten(1).gather(1, cell).view(B, Hc, n, C, L)  # (B,Hc,n,C,L)
    # (B,H,n,C,L)
    weights = attn.window_weights(scores, pos.unsqueeze(-2), pb, lob, memory.lengths, allowed)
    heads = attn.dropout(weights) @ vb  # (B,H,n,C,Dh)
    if blocks.slot is None:
        heads = heads.view(B, H, n * C, Dh)[:, :, :T]
    else:
        back = ((b * H + h) * (n * C) + blocks.slot).transpose(1, 2)  # (B,T,H)
        heads = heads.view(-1, Dh).index_select(0, back.reshape(-1))
        heads = heads.view(B, T, H, Dh).transpose(1, 2)  # (B,H,T,Dh)
    if not ctx.need_weights:
        return heads, None
    full = torch.zeros(B, H, n * C, S, dtype=weights.dtype, device=q.device)
    band_index = pos.clamp(0, S - 1).unsqueeze(-2).expand(B, H, n, C, L)
    band_index = band_index.reshape(B, H, n * C, L)
    full.scatter_add_(-1, band_index, weights.reshape(B, H, n * C, L))
    if blocks.slot is None:
        return heads, full[:, :, :T]
    return heads, full.gather(2, blocks.slot.unsqueeze(-1).expand(B, H, T, S))  # (B,H,T,S)


def _to_slots(x: Tensor, slot: Tensor | None, slots: int, fill: float) -> Tensor:
    """Per-query values (B,Hc,T) -> per-slot values (B,Hc,slots), ``fill`` where empty."""
    if slot is None:
        return F.pad(x, (0, slots - x.size(-1)), value=fill)
    return x.new_full((*x.shape[:-1], slots), fill).scatter(-1, slot, x)
