"""The cross-attention contract shared by every variant, and its score functions.

Contract (shape legend in docs/design.md): a query ``(B,T,D)``, the source side
as a :class:`Memory` (per-head keys and values projected once per sentence by
:meth:`CrossAttention.project_memory`, the source mask and lengths) and the
target side as a :class:`Context` (the queries' positions, the training update,
whether the weights are wanted) -> an :class:`AttentionOutput`: ``context
(B,T,D)`` and, on request, ``weights (B,H,T,S)`` that are zero outside what was
attended.
"""

from __future__ import annotations

import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from nmt.setup.attention import AttentionConfig
from nmt.setup.registry import Registry

SCORES: Registry[type[Score]] = Registry("attention score")


class Memory(NamedTuple):
    """The source side of a cross-attention call: the encoder output projected to
    per-head keys and values (once per sentence), and which positions are real."""

    key: Tensor  # (B,H,S,Dh)
    value: Tensor  # (B,H,S,Dh)
    # (B,1,S) True = a real source token; in a sentence-group layer (B,T,S), the
    # tokens each query may read (SentenceGroups.restrict)
    mask: Tensor
    lengths: Tensor  # (B,) real source lengths

    def select(self, index: Tensor) -> Memory:
        """Keep batch rows ``index`` (B',) (beam search, finished sentences)."""
        return Memory(*(x[index] for x in self))


State = dict[str, Tensor]  # a variant's incremental-decoding state, kept by its layer


@dataclass(frozen=True)
class Context:
    """The target side of a cross-attention call, which flows down with the queries
    from the decoder stack through every layer (fairseq's and Hugging Face's
    decoders pass the same things as separate arguments)."""

    positions: Tensor  # (T,) the target position of each query
    update: int = 0  # the optimiser update in training (0-based): schedules read it
    need_weights: bool = False  # return the weights (B,H,T,S) too
    # what the position scheme adds to cross-attention scores (model.positions.
    # cross_alibi: a distance from the diagonal); None: nothing
    cross_bias: DiagonalBias | None = None
    # which sentence each source position and query is in (model.decoder.group_layers);
    # None: the input is one sentence
    groups: SentenceGroups | None = None


class LossTerm(ABC):
    """A training loss term of a variant's own (REINFORCE's, for hard attention),
    returned with the output that made it and added by the objective: nothing
    travels back down to the module."""

    @abstractmethod
    def total(
        self, calls: list[LossTerm], reward: Tensor, tgt_mask: Tensor
    ) -> tuple[Tensor, dict[str, float]]:
        """The summed term of one layer's ``calls`` (this one among them: a
        two-stream decoder calls each layer twice a batch) and figures to log.

        reward (B,T): detached reward of each target token, minus its label-smoothed
        training loss (0 at padding); tgt_mask (B,T): real target positions."""


@dataclass(frozen=True)
class AttentionOutput:
    """What a cross-attention layer returns: the context, with the weights the
    centres of a variant that looks through a window around one (local attention's
    p_t, for the plots and the diagnostics) when asked, a training loss term of the
    variant's own (hard attention's REINFORCE), and ``extras``, whatever else a
    variant returns, in a type of its own. A new variant never edits this class."""

    context: Tensor  # (B,T,D)
    weights: Tensor | None = None  # (B,H,T,S), zero outside the attended span
    centers: Tensor | None = None  # (B,Hc,T), Hc = H or 1 (shared by the heads)
    loss: LossTerm | None = None
    extras: Any = None


def key_bias(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """Boolean key mask (True = attend) -> additive bias; finite so no row becomes NaN."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
        ~mask, torch.finfo(dtype).min
    )


def alibi_slopes(heads: int) -> Tensor:
    """(H,) m_h = 2^(−8h/H) for h = 1..H: Press et al. 2022's geometric sequence (sec.
    3), which they give for H a power of two and which is used here for any H."""
    return torch.pow(2.0, -8.0 * torch.arange(1, heads + 1, dtype=torch.float32) / heads)


@dataclass(frozen=True)
class DiagonalBias:
    """Cross-attention ALiBi (``model.positions.cross_alibi``): −m_h·|s − a_t| for
    head h, query t and source position s, a linear penalty on the distance from
    the diagonal (Press et al. 2022's bias and slopes, measured from a_t, the query's
    place on its sentence's diagonal, instead of from its own position). The one
    place of its formula (:meth:`penalty`), for every attention kind's scores,
    windowed and banded ones included."""

    anchors: Tensor  # (B,T) each query's a_t

    @classmethod
    def of(cls, positions: Tensor, lengths: Tensor, ratio: float) -> DiagonalBias:
        """a_t = t / r for queries at target positions (T,) (a target sentence is r
        times as long as its source, so target position t faces source position
        t/r), at most the last real source position of each sentence (B,)."""
        last = (lengths - 1).clamp(min=0).to(torch.float32)  # (B,)
        return cls(torch.minimum(positions / ratio, last.unsqueeze(1)))  # (B,T)

    @staticmethod
    def penalty(slopes: Tensor, anchors: Tensor, keys: Tensor) -> Tensor:
        """−m·|s − a|, broadcast as the caller arranges slopes, anchors and keys."""
        return -slopes * (keys.to(anchors.dtype) - anchors).abs().to(slopes.dtype)

    def scores(self, heads: int, keys: Tensor) -> Tensor:
        """The bias of every query against source positions keys (S,) -> (B,H,T,S)."""
        slopes = alibi_slopes(heads).to(self.anchors.device).view(1, -1, 1, 1)
        return self.penalty(slopes, self.anchors.unsqueeze(1).unsqueeze(-1), keys)

    def at(self, slopes: Tensor, queries: Tensor, keys: Tensor) -> Tensor:
        """The bias of the queries ``queries`` (B,*,Q, indices of the T queries)
        against ``keys`` (B,*,K), slopes arranged by the caller -> (B,H,*,Q,K)."""
        anchors = self.anchors.gather(1, queries.flatten(1)).view(queries.shape)
        return self.penalty(slopes, anchors.unsqueeze(-1), keys.unsqueeze(-2))


@dataclass(frozen=True)
class SentenceGroups:
    """Sentence groups (G-Transformer, Bao et al. 2021, sec. 4): which sentence of a
    multi-sentence input each source position and each query is in, counted by the
    separators before it (nmt.data.vocab.Vocab). A separator ends its sentence: on
    the source it belongs to the sentence before it, and the query that predicts it
    reads that sentence; the query whose input it is starts the next one. A query
    past the source's last sentence reads the last."""

    source: Tensor  # (B,S) each source position's sentence, from 0
    target: Tensor  # (B,T) each query's sentence

    @staticmethod
    def of_source(src: Tensor, separator: int) -> Tensor:
        """Source ids (B,S) -> each position's sentence (B,S)."""
        ends = src == separator  # (B,S)
        return ends.cumsum(1) - ends.long()

    @classmethod
    def of(cls, source: Tensor, separators: Tensor) -> SentenceGroups:
        """``separators`` (B,T): how many each query's inputs hold (its own included)."""
        return cls(source, torch.minimum(separators, source.amax(1, keepdim=True)))

    def restrict(self, memory: Memory) -> Memory:
        """``memory`` whose mask (B,T,S) keeps each query to its own sentence."""
        same = self.target.unsqueeze(2) == self.source.unsqueeze(1)  # (B,T,S)
        return memory._replace(mask=memory.mask & same)


def masked_softmax(scores: Tensor, mask: Tensor) -> Tensor:
    """Softmax over the last dim where ``mask`` is True; a fully masked row gives zeros.

    A finite fill (not -inf) keeps fully masked rows NaN-free; the final
    multiply zeroes them (and every masked entry).
    """
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1) * mask


# ----------------------------------------------------------------- scores


class Score(nn.Module):
    """Alignment score between per-head queries and keys (Luong et al. 2015, eq. 8).

    q (B,H,*,T,Dh), k (B,H,*,S,Dh) -> (B,H,*,T,S), where * are optional extra
    batch dims (local attention scores blocks of queries against bands of keys).
    ``omits_query_term``: the score leaves out a term that is constant over the
    keys of a query (the softmax over source positions ignores it); a caller that
    compares scores across queries adds its own (BiDAF fusion).
    """

    omits_query_term = False

    def __init__(self, heads: int, head_dim: int) -> None:
        super().__init__()
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, q: Tensor, k: Tensor) -> Tensor:
        return (q @ k.transpose(-1, -2)) * self.scale


@SCORES.register("dot")
class DotScore(Score):
    """Scaled dot product q·k / sqrt(Dh) (Vaswani et al. 2017, eq. 1)."""


@SCORES.register("general")
class GeneralScore(Score):
    """Bilinear q W kᵀ per head (Luong et al. 2015, eq. 8 "general"), scaled."""

    def __init__(self, heads: int, head_dim: int) -> None:
        super().__init__(heads, head_dim)
        self.weight = nn.Parameter(torch.eye(head_dim).repeat(heads, 1, 1))  # (H,Dh,Dh)

    def forward(self, q: Tensor, k: Tensor) -> Tensor:
        q = torch.einsum("bh...d,hde->bh...e", q, self.weight)
        return super().forward(q, k)


@SCORES.register("concat")
class ConcatScore(Score):
    """Additive vᵀ tanh(W_q q + W_k k) per head (Bahdanau et al. 2015; Luong et al. 2015,
    eq. 8 "concat"). Materialises (B,H,*,T,S,Dh): fine for sentences, costly for long
    inputs (local attention keeps S to the window band)."""

    def __init__(self, heads: int, head_dim: int) -> None:
        super().__init__(heads, head_dim)
        self.w_q = nn.Parameter(torch.empty(heads, head_dim, head_dim))
        self.w_k = nn.Parameter(torch.empty(heads, head_dim, head_dim))
        self.v = nn.Parameter(torch.empty(heads, head_dim))
        for p in (self.w_q, self.w_k):
            nn.init.xavier_uniform_(p)
        nn.init.normal_(self.v, std=head_dim**-0.5)

    def forward(self, q: Tensor, k: Tensor) -> Tensor:
        q = torch.einsum("bh...d,hde->bh...e", q, self.w_q)  # (B,H,*,T,Dh)
        k = torch.einsum("bh...d,hde->bh...e", k, self.w_k)  # (B,H,*,S,Dh)
        energy = torch.tanh(q.unsqueeze(-2) + k.unsqueeze(-3))  # (B,H,*,T,S,Dh)
        return torch.einsum("bh...d,hd->bh...", energy, self.v)  # (B,H,*,T,S)


@SCORES.register("trilinear")
class TrilinearScore(Score):
    """BiDAF's trilinear similarity (Seo et al. 2017, sec. 2.4, eq. 1) per head:
    s(q, k) = w_qᵀq + w_kᵀk + w_mᵀ(q ∘ k).

    The w_qᵀq term is the same for every source position of a query, so it cancels
    in the softmax over positions (and in hard attention's argmax and samples):
    the score leaves it out (``omits_query_term``), and BiDAF fusion, which compares
    scores across target positions, owns w_q. w_m starts at 1/sqrt(Dh) and w_k at
    zero, so the score starts as the scaled dot product.
    """

    omits_query_term = True

    def __init__(self, heads: int, head_dim: int) -> None:
        super().__init__(heads, head_dim)
        self.w_k = nn.Parameter(torch.zeros(heads, head_dim))
        self.w_m = nn.Parameter(torch.full((heads, head_dim), self.scale))

    def forward(self, q: Tensor, k: Tensor) -> Tensor:
        extra = (1,) * (q.dim() - 4)  # the optional * dims
        w_m = self.w_m.view(1, self.w_m.size(0), *extra, 1, -1)  # (1,H,*,1,Dh)
        w_k = self.w_k.view(1, self.w_k.size(0), *extra, -1, 1)  # (1,H,*,Dh,1)
        key_term = (k @ w_k).transpose(-1, -2)  # (B,H,*,1,S)
        return (q * w_m) @ k.transpose(-1, -2) + key_term  # (B,H,*,T,S)


# --------------------------------------------------------------- the contract


def split_heads(x: Tensor, heads: int) -> Tensor:
    """(B,L,D) -> (B,H,L,Dh)."""
    B, L, D = x.shape
    return x.view(B, L, heads, D // heads).transpose(1, 2)  # (B,H,L,Dh)


def merge_heads(x: Tensor) -> Tensor:
    """(B,H,L,Dh) -> (B,L,D)."""
    B, H, L, Dh = x.shape
    return x.transpose(1, 2).reshape(B, L, H * Dh)  # (B,L,D)


# What ``use_kernels`` receives: the fast functions of ``train.kernels: auto`` by
# name (nmt.kernels.KERNELS).
Kernels = Mapping[str, Callable[..., Any]]


class CrossAttention(nn.Module):
    """Multi-head encoder-decoder attention; subclasses decide where to look, in
    ``forward(query, memory, ctx)``.

    Parameter names (``q_proj``, ``k_proj``, ``v_proj``, ``out_proj``, ``score``)
    are the checkpoint format. :meth:`queries` and :meth:`scores` are public: BiDAF
    fusion scores with the layer's own variant through them.
    """

    normalised = True  # weights sum to one over the attended span
    takes_state = False  # forward takes ``state`` (set from its signature)

    def __init__(self, cfg: AttentionConfig, d_model: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.cfg = cfg
        self.heads = heads
        self.head_dim = d_model // heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
        self.score = SCORES.get(cfg.score)(heads, self.head_dim)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse, when the class is defined, a variant whose ``forward`` does not take
        the contract's arguments (a plug-in written for another signature)."""
        super().__init_subclass__(**kwargs)
        params = list(inspect.signature(cls.forward).parameters)
        if params[:4] != ["self", "query", "memory", "ctx"]:
            raise TypeError(
                f"{cls.__qualname__}.forward({', '.join(params[1:])}) does not follow the "
                "cross-attention contract forward(query, memory, ctx) (docs/extending.md)"
            )
        # a variant with a state between incremental decoding steps takes it as its
        # own argument, a dict the decoder layer keeps for it (local_s: its centre)
        cls.takes_state = "state" in params

    def queries(self, query: Tensor) -> Tensor:
        """query (B,T,D) -> per-head queries (B,H,T,Dh)."""
        return split_heads(self.q_proj(query), self.heads)

    def scores(self, q: Tensor, memory: Memory, ctx: Context) -> Tensor:
        """Per-head queries (B,H,T,Dh) against every source position -> scores
        (B,H,T,S), before masking, with the distance from the diagonal under
        ``cross_alibi``."""
        scores = self.score(q, memory.key)
        if ctx.cross_bias is None:
            return scores
        keys = torch.arange(memory.key.size(2), device=q.device)
        return scores + ctx.cross_bias.scores(self.heads, keys).to(scores.dtype)

    def project_memory(self, memory: Tensor, src_mask: Tensor) -> Memory:
        """memory (B,S,D), src_mask (B,1,S) -> per-head keys/values, once per sentence."""
        return Memory(
            split_heads(self.k_proj(memory), self.heads),
            split_heads(self.v_proj(memory), self.heads),
            src_mask,
            src_mask.sum(dim=(1, 2)),
        )

    def output(self, ctx: Tensor) -> Tensor:
        """Per-head contexts (B,H,T,Dh) -> the layer's context (B,T,D)."""
        return self.out_proj(merge_heads(ctx))

    def forward(self, query: Tensor, memory: Memory, ctx: Context) -> AttentionOutput:
        raise NotImplementedError

    def use_kernels(self, kernels: Kernels) -> None:
        """Called once when training starts under ``train.kernels: auto``, with the
        fast functions by name: a variant takes the ones that compute its own
        functions (local_p: its Gaussian window with a hand-written gradient)."""
