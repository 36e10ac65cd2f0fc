"""Where a token is: the position schemes of ``model.positions`` (nmt.setup.model),
one registered class each (``POSITIONS``, as attention kinds are), which says what
the scheme adds through two hooks the model calls:

- :meth:`PositionScheme.embeddings`: a table added to the token embeddings (the
  absolute schemes: ``sinusoidal``, ``learned``), built once per embedding;
- :meth:`PositionScheme.self_attention`: what each self-attention layer does with
  its queries' and keys' positions (:class:`SelfPositions`: ``rope`` rotates them,
  ``alibi`` and ``relative`` add a bias to the scores), built once per layer.

Cross-attention compares target and source positions, which no scheme relates;
``cross_alibi`` gives it a distance from the diagonal, whatever the kind
(:class:`nmt.attention.base.DiagonalBias`).

Positions count from 0 in every sequence, the first target input (``<s>``) at 0;
an incremental decoder's queries are the last positions of its cache.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from nmt.attention.base import alibi_slopes
from nmt.setup.model import POSITIONS, PositionsConfig


def sinusoids(length: int, dim: int) -> Tensor:
    """Sinusoidal position encodings (Vaswani et al. 2017, sec. 3.5) -> (length, dim):
    sin in the even dimensions 2i, cos in the odd ones 2i + 1, so an odd ``dim`` ends
    with a sine."""
    pos = torch.arange(length, dtype=torch.float32).unsqueeze(1)  # (L,1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    pe = torch.zeros(length, dim)
    pe[:, 0::2] = torch.sin(pos * freq)  # (L, ceil(dim/2))
    pe[:, 1::2] = torch.cos(pos * freq[: dim // 2])  # (L, floor(dim/2))
    return pe


class AbsolutePositions(nn.Module):
    """What an embedding adds at each position: the base adds nothing (the schemes
    that act in attention)."""

    def forward(self, L: int, offset: int | Tensor) -> Tensor | None:
        """The vectors of positions offset..offset+L−1: (L,D), or (B,L,D) for
        per-sequence offsets (B,1); None for a scheme that adds none."""
        return None


class SinusoidTable(AbsolutePositions):
    """Vaswani et al. 2017's fixed table, ``rows`` positions (a buffer, not saved:
    checkpoints hold no sinusoids)."""

    def __init__(self, rows: int, d_model: int) -> None:
        super().__init__()
        self.register_buffer("table", sinusoids(rows, d_model), persistent=False)

    def forward(self, L: int, offset: int | Tensor) -> Tensor:
        if isinstance(offset, torch.Tensor):
            return self.table[offset + torch.arange(L, device=offset.device)]
        return self.table[offset : offset + L]


class LearnedTable(AbsolutePositions):
    """A trained vector per position (Gehring et al. 2017), ``rows`` positions."""

    def __init__(self, rows: int, d_model: int) -> None:
        super().__init__()
        self.learned = nn.Embedding(rows, d_model)
        nn.init.normal_(self.learned.weight, std=d_model**-0.5)

    def forward(self, L: int, offset: int | Tensor) -> Tensor:
        index = torch.arange(L, device=self.learned.weight.device) + offset  # (L,) or (B,L)
        return self.learned(index)


class SelfPositions(nn.Module):
    """What a self-attention layer does with positions: the base does nothing (the
    absolute schemes put them in the embeddings)."""

    def rotate(self, x: Tensor, pos: Tensor) -> Tensor:
        """x (B,H,L,Dh) queries or keys at positions pos (L,) -> the same, rotated."""
        return x

    def bias(self, q: Tensor, q_pos: Tensor, keys: int) -> Tensor | None:
        """An additive bias (B or 1,H,L,t) on the scores of queries q (B,H,L,Dh) at
        positions q_pos (L,) against keys at positions 0..keys−1; None: none."""
        return None


class Rotary(SelfPositions):
    """RoPE (Su et al. 2021, eq. 34): each pair (x_2i, x_2i+1) of a head's
    dimensions is rotated by the angle p·θ_i, θ_i = 10000^(−2i/Dh), so that the
    score of a query at p and a key at p' depends on p − p' only."""

    def __init__(self, head_dim: int) -> None:
        super().__init__()
        freq = torch.pow(10000.0, -torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        self.register_buffer("freq", freq, persistent=False)  # (Dh/2,)

    def rotate(self, x: Tensor, pos: Tensor) -> Tensor:
        angle = pos.to(self.freq.dtype).unsqueeze(-1) * self.freq  # (L,Dh/2)
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]  # (B,H,L,Dh/2) each
        turned = torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1)
        return turned.flatten(-2)  # (B,H,L,Dh), pairs back in place


class ALiBi(SelfPositions):
    """ALiBi (Press et al. 2022, sec. 3): the score of query i and key j gets
    −m_h·|i − j|; a causal layer never sees j > i, so it is Press et al.'s
    −m_h·(i − j) there."""

    def __init__(self, heads: int) -> None:
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(heads), persistent=False)  # (H,)

    def bias(self, q: Tensor, q_pos: Tensor, keys: int) -> Tensor:
        k_pos = torch.arange(keys, device=q.device)
        gap = (q_pos.unsqueeze(-1) - k_pos).abs().to(q.dtype)  # (L,t)
        return -self.slopes.to(q.dtype).view(1, -1, 1, 1) * gap  # (1,H,L,t)


class RelativeKeys(SelfPositions):
    """Relative position representations (Shaw et al. 2018, eq. 5): the score of
    query i and key j gets q_i·a_{clip(j − i, k)}/sqrt(Dh), with a learned vector a
    per clipped distance, shared by the heads of a layer. The value term of their
    eq. 3 (a^V) is left out: it would need the weights the fused kernel does not
    return."""

    def __init__(self, head_dim: int, max_distance: int) -> None:
        super().__init__()
        self.max_distance = max_distance
        self.keys = nn.Parameter(torch.randn(2 * max_distance + 1, head_dim) * head_dim**-0.5)
        self.scale = head_dim**-0.5

    def bias(self, q: Tensor, q_pos: Tensor, keys: int) -> Tensor:
        k = self.max_distance
        k_pos = torch.arange(keys, device=q.device)
        index = (k_pos - q_pos.unsqueeze(-1)).clamp(-k, k) + k  # (L,t)
        per_distance = (q @ self.keys.to(q.dtype).t()) * self.scale  # (B,H,L,2k+1)
        B, H, L, _ = per_distance.shape
        return per_distance.gather(-1, index.expand(B, H, L, keys))  # (B,H,L,t)


class PositionScheme:
    """A position scheme (``model.positions.kind``): what it adds to the embeddings
    and to each self-attention layer; each hook's default adds nothing. An absolute
    table has ``max_positions`` + ``shift`` rows, so that SHAPE's offsets stay in it."""

    @staticmethod
    def embeddings(cfg: PositionsConfig, max_positions: int, d_model: int) -> AbsolutePositions:
        return AbsolutePositions()

    @staticmethod
    def self_attention(cfg: PositionsConfig, heads: int, head_dim: int) -> SelfPositions:
        return SelfPositions()


class Sinusoidal(PositionScheme):
    @staticmethod
    def embeddings(cfg: PositionsConfig, max_positions: int, d_model: int) -> AbsolutePositions:
        return SinusoidTable(max_positions + cfg.shift, d_model)


class Learned(PositionScheme):
    @staticmethod
    def embeddings(cfg: PositionsConfig, max_positions: int, d_model: int) -> AbsolutePositions:
        return LearnedTable(max_positions + cfg.shift, d_model)


class RoPE(PositionScheme):
    @staticmethod
    def self_attention(cfg: PositionsConfig, heads: int, head_dim: int) -> SelfPositions:
        return Rotary(head_dim)


class ALiBiScheme(PositionScheme):
    @staticmethod
    def self_attention(cfg: PositionsConfig, heads: int, head_dim: int) -> SelfPositions:
        return ALiBi(heads)


class Relative(PositionScheme):
    @staticmethod
    def self_attention(cfg: PositionsConfig, heads: int, head_dim: int) -> SelfPositions:
        return RelativeKeys(head_dim, cfg.max_distance)


def scheme(cfg: PositionsConfig) -> type[PositionScheme]:
    """The registered scheme of ``model.positions.kind``."""
    return POSITIONS.get(cfg.kind)
