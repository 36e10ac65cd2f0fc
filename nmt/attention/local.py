"""Local attention (Luong, Pham, Manning 2015, sec. 3.2): local_m and local_p, and
local_s, whose centre moves by predicted steps.

Each query t attends only to the window [round(p_t) − w, round(p_t) + w] of
real source positions around a centre p_t. The variants differ in p_t.

This file holds the equations, computed densely: scores over all S positions,
masked to the window, O(T·S). ``model.attention.path`` (``auto``, the default,
or ``windowed``) computes the same weights over bands of keys in O(T·W)
(nmt.attention.bands); ``dense`` always takes the path here.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nmt.attention import bands
from nmt.attention.base import (
    AttentionOutput,
    Context,
    CrossAttention,
    Kernels,
    Memory,
    State,
    masked_softmax,
)
from nmt.setup.attention import LocalConfig, LocalMConfig, LocalPConfig, LocalSConfig


class LocalAttention(CrossAttention):
    """Shared machinery; subclasses provide the centres p_t."""

    monotone = False  # whether p_t never decreases along t (then runs of queries block well)
    # a monotone kind's most keys that a run of W queries spans (bands.band_length),
    # so that compiled code need not read it back (None: measured each time)
    band_length: int | None = None

    def __init__(self, cfg: LocalConfig, d_model: int, heads: int, dropout: float) -> None:
        super().__init__(cfg, d_model, heads, dropout)
        self.window = cfg.window
        self.width = 2 * cfg.window + 1  # W

    def centers(
        self, query: Tensor, memory: Memory, ctx: Context, state: State | None = None
    ) -> Tensor:
        """Real-valued p_t, (B,H,T) or (B,1,T) when shared by all heads; ``state``:
        the layer's incremental-decoding state (None: the whole target at once)."""
        raise NotImplementedError

    def window_softmax(self, scores: Tensor, mask: Tensor, pos: Tensor, p: Tensor) -> Tensor:
        """The weights over each query's window: ``mask`` (B,Hc,…,Q,K) True inside it;
        local_m: the softmax over the window (eq. 7)."""
        return masked_softmax(scores, mask)

    def forward(
        self, query: Tensor, memory: Memory, ctx: Context, state: State | None = None
    ) -> AttentionOutput:
        q = self.queries(query)  # (B,H,T,Dh)
        p = self.centers(query, memory, ctx, state)  # (B,Hc,T)
        lo = torch.round(p.detach()).long() - self.window  # (B,Hc,T) first window position
        banded = None
        if self.cfg.path != "dense":
            auto = self.cfg.path == "auto"
            banded = bands.banded_attention(self, q, memory, ctx, p, lo, auto)
        heads, weights = banded or self.dense(q, memory, ctx, p, lo)
        out = self.output(heads)
        if not ctx.need_weights:
            return AttentionOutput(out)
        return AttentionOutput(out, weights, centers=p)

    def window_weights(
        self,
        scores: Tensor,
        pos: Tensor,
        p: Tensor,
        lo: Tensor,
        lengths: Tensor,
        allowed: Tensor | None = None,
    ) -> Tensor:
        """The window mask (and local_p's Gaussian) for any layout of source positions:
        scores (B,H,…,Q,K); pos (…,K) or broadcastable source positions;
        p, lo (B,Hc,…,Q); lengths (B,); ``allowed`` (B,1,…,Q,K), where a sentence-group
        layer keeps each query to its own sentence -> attention weights (B,H,…,Q,K)
        (a query whose window holds none of its sentence reads nothing)."""
        extra = (1,) * (scores.dim() - 1)
        real = (pos >= 0) & (pos < lengths.view(-1, *extra))
        lo = lo.unsqueeze(-1)  # (B,Hc,…,Q,1)
        mask = (pos >= lo) & (pos < lo + self.width) & real  # (B,Hc,…,Q,K)
        if allowed is not None:
            mask = mask & allowed
        return self.window_softmax(scores, mask, pos, p)

    def dense(
        self, q: Tensor, memory: Memory, ctx: Context, p: Tensor, lo: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Every source position, masked to the window -> context (B,H,T,Dh), weights
        (B,H,T,S)."""
        S = memory.key.size(2)
        pos = torch.arange(S, device=q.device)  # (S,)
        allowed = memory.mask.unsqueeze(1)  # (B,1,1,S), a group layer's (B,1,T,S)
        scores = self.scores(q, memory, ctx)
        weights = self.window_weights(scores, pos, p, lo, memory.lengths, allowed)
        return self.dropout(weights) @ memory.value, weights


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
        step = 1 / cfg.ratio if cfg.center == "length_ratio" else 1.0  # most p_t − p_{t−1}
        self.band_length = bands.band_length(self.width, step)

    def centers(
        self, query: Tensor, memory: Memory, ctx: Context, state: State | None = None
    ) -> Tensor:
        p = ctx.positions.to(query.dtype)  # (T,)
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
        self.gaussian = gaussian_window  # the equations; see use_kernels

    def centers(
        self, query: Tensor, memory: Memory, ctx: Context, state: State | None = None
    ) -> Tensor:
        hidden = torch.tanh(self.center_proj(query))  # (B,T,D)
        # (B,T,Hc), then a transposed view, so that the gradient reaching tanh is
        # contiguous (docs/benchmarks.md, "local-p's centre predictor")
        logits = F.linear(hidden, self.center_v).transpose(1, 2)  # (B,Hc,T)
        return memory.lengths.to(query.dtype).view(-1, 1, 1) * torch.sigmoid(logits)

    def use_kernels(self, kernels: Kernels) -> None:
        """Under ``train.kernels: auto`` (nmt.kernels.install): the same Gaussian
        window with a hand-written gradient (nmt.kernels.gaussian)."""
        self.gaussian = kernels["gaussian_window"]

    def window_softmax(self, scores: Tensor, mask: Tensor, pos: Tensor, p: Tensor) -> Tensor:
        return self.gaussian(scores, p, pos, mask, self.sigma, self.cfg.gaussian == "multiply")


class LocalStepAttention(LocalPredictiveAttention):
    """local-s: a window whose centre moves by a predicted non-negative step, so that
    it can reach any position of an input of any length. p_t = Σ_{t' ≤ t} Δ_t',
    Δ_t = max_step · sigmoid(v_pᵀ tanh(W_p h_t)): the centre is where the steps so
    far have carried it, as in location-relative attention (Battenberg et al. 2020)
    and the monotone location attention of Dubois et al. 2020 and Ray Chowdhury &
    Caragea 2023, here as a centre for Luong et al.'s window and Gaussian (local-p's,
    ``gaussian`` and ``per_head`` as there). A cumulative sum over the target in
    training, one step at a time when decoding: the last centre is this layer's
    incremental state. The centre stops at the last real source position (as
    local-m's), so that a query past the end still reads the source's end."""

    monotone = True

    def __init__(self, cfg: LocalSConfig, d_model: int, heads: int, dropout: float) -> None:
        super().__init__(cfg, d_model, heads, dropout)
        self.band_length = bands.band_length(self.width, cfg.max_step)

    def centers(
        self, query: Tensor, memory: Memory, ctx: Context, state: State | None = None
    ) -> Tensor:
        hidden = torch.tanh(self.center_proj(query))  # (B,T,D)
        logits = F.linear(hidden, self.center_v).transpose(1, 2)  # (B,Hc,T)
        p = (self.cfg.max_step * torch.sigmoid(logits)).cumsum(-1)  # (B,Hc,T)
        if state is not None:
            if "center" in state:  # steps decoded before: move on from the last centre
                p = p + state["center"]
            state["center"] = p[..., -1:]  # (B,Hc,1)
        last = (memory.lengths - 1).clamp(min=0).to(p.dtype).view(-1, 1, 1)  # (B,1,1)
        return torch.minimum(p, last)


def gaussian_window(
    scores: Tensor, p: Tensor, pos: Tensor, mask: Tensor, sigma: float, multiply: bool
) -> Tensor:
    """local-p's weights over its window. With d = s − p_t, the distance of source
    position s from the predicted centre, and G = −d²/2σ²: ``multiply`` (Luong et
    al. 2015, eq. 10) a · exp(G), a = the window softmax of the scores; ``bias``
    (Yang et al. 2018, eq. 4) softmax(scores + G).

    scores (B,H,…,Q,K); p (B,Hc,…,Q) real-valued centres (Hc = H or 1); pos (…,K)
    source positions, broadcastable; mask (B,Hc,…,Q,K) True = inside the window ->
    weights (B,H,…,Q,K), zero outside the mask. Under ``train.kernels: auto``
    training computes the same with a hand-written gradient (nmt.kernels.gaussian)."""
    log_g = (pos.to(p.dtype) - p.unsqueeze(-1)).square().mul_(-0.5 / sigma**2)  # G
    if multiply:
        return masked_softmax(scores, mask) * log_g.exp_()
    return masked_softmax(scores + log_g, mask)
