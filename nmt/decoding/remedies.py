"""Decoding remedies: what changes the output a search prefers, each one object the
search calls at every step and at the end (as fairseq's ``Search`` strategies and
transformers' ``LogitsProcessor`` list do), so that adding one is a class and a
registration line.

A remedy may change three things, each a hook with a default that changes nothing:

- ``bounds``: the least and the most pieces of each sentence's output (a least
  length, the oracle length of Newman et al. 2020);
- ``normalise``: a hypothesis's log-probability before it is ranked (GNMT's length
  penalty, Wu et al. 2016, eq. 14);
- ``term``: a number added to each hypothesis's normalised score (a word reward,
  Murray & Chiang 2018; GNMT's coverage penalty, from the step's cross-attention),
  with a state of its own per hypothesis, which the search reorders as beams move.

The recipe's keys make the built-in ones (:func:`remedies_of`); ``decode.remedies``
lists others by kind, registered in ``nmt.setup.decoding.REMEDIES`` (a plug-in
registers its own: docs/extending.md). Greedy search and sampling apply the bounds
and the normaliser (the terms rank beams: beam search only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor

from nmt.data.vocab import EOS, PAD
from nmt.setup.decoding import REMEDIES, DecodeConfig, RemedyConfig

State = tuple[Tensor, ...]  # a remedy's per-hypothesis state: tensors of N rows


@dataclass(frozen=True)
class Lengths:
    """Per sentence (B,): ``limit``, the step at which EOS is forced (an output holds
    at most limit − 1 pieces), and ``least``, the pieces an output holds before EOS
    may end it."""

    limit: Tensor
    least: Tensor

    def select(self, index: Tensor) -> Lengths:
        return Lengths(self.limit[index], self.least[index])


class Remedy:
    """One remedy; subclasses override the hooks they use. ``needs_attention``: the
    search computes each step's cross-attention for :meth:`term`."""

    needs_attention: ClassVar[bool] = False

    def bounds(self, lengths: Lengths, src: Tensor) -> Lengths:
        """The output bounds of each sentence of src (B,S), as this remedy changes them."""
        return lengths

    def normalise(self, scores: Tensor, length: Tensor) -> Tensor:
        """Log-probabilities (N,) or (N,V) of hypotheses of ``length`` pieces (N,),
        EOS counted, as ranked."""
        return scores

    def begin(self, src: Tensor) -> State:
        """The state of each sentence of src (B,S) before the first step."""
        return ()

    def term(
        self, state: State, length: Tensor, attention: Tensor | None, finished: Tensor
    ) -> tuple[Tensor | None, State]:
        """What this remedy adds to each hypothesis's normalised score (N,) (None:
        nothing), and its state after the step; ``attention`` (N,S) the step's
        cross-attention (the mean over layers and heads) when asked for, None else;
        ``finished`` (N,) the hypotheses that ended before this step."""
        return None, state


def length_penalty(length: Tensor, alpha: float) -> Tensor:
    """((5 + |Y|) / 6) ** alpha — Wu et al. 2016, eq. 14."""
    return ((5.0 + length) / 6.0) ** alpha


class LengthPenalty(Remedy):
    """GNMT's length normalisation (``decode.alpha``): log P(Y) / ((5 + |Y|) / 6)^α."""

    def __init__(self, alpha: float) -> None:
        self.alpha = alpha

    def normalise(self, scores: Tensor, length: Tensor) -> Tensor:
        divisor = length_penalty(length, self.alpha)
        return scores / (divisor.unsqueeze(1) if scores.dim() > 1 else divisor)


class WordReward(Remedy):
    """γ per output piece (``decode.word_reward``; Murray & Chiang 2018)."""

    def __init__(self, gamma: float) -> None:
        self.gamma = gamma

    def term(
        self, state: State, length: Tensor, attention: Tensor | None, finished: Tensor
    ) -> tuple[Tensor, State]:
        return self.gamma * length, state


# Coverage below this counts as this much in the penalty: a variant that can give a
# source piece exactly zero weight (a local window, sparsemax) would otherwise make
# log 0 = -inf of every hypothesis of a long input
COVERAGE_FLOOR = 1e-3


def coverage_penalty(beta: float, coverage: Tensor, counted: Tensor) -> Tensor:
    """GNMT's cp = β·Σ_s log min(c_s, 1) over the counted source pieces (Wu et al.
    2016, eq. 14; c_s the attention piece s received over the output so far, the
    mean over layers and heads), c_s floored at :data:`COVERAGE_FLOOR`.
    coverage, counted (N,S) -> (N,)."""
    capped = coverage.clamp(max=1.0).clamp(min=COVERAGE_FLOOR)
    return beta * (capped.log() * counted).sum(-1)


class Coverage(Remedy):
    """GNMT's coverage penalty (``decode.coverage``, β) on the variant's own
    cross-attention: its state is what each source piece has received so far, and
    which pieces count (neither padding nor EOS); a finished hypothesis's is frozen."""

    needs_attention = True

    def __init__(self, beta: float) -> None:
        self.beta = beta

    def begin(self, src: Tensor) -> State:
        counted = ((src != PAD) & (src != EOS)).float()  # (B,S)
        return counted, torch.zeros_like(counted)

    def term(
        self, state: State, length: Tensor, attention: Tensor | None, finished: Tensor
    ) -> tuple[Tensor, State]:
        assert attention is not None, "the search computes attention for needs_attention"
        counted, covered = state
        covered = covered + attention * ~finished.unsqueeze(1)  # (N,S)
        return coverage_penalty(self.beta, covered, counted), (counted, covered)


class LeastLength(Remedy):
    """No EOS before a·S + b pieces (``decode.min_len_a``, ``min_len_b``)."""

    def __init__(self, a: float, b: int) -> None:
        self.a, self.b = a, b

    def bounds(self, lengths: Lengths, src: Tensor) -> Lengths:
        s = (src != PAD).sum(1).float()  # (B,)
        return Lengths(lengths.limit, (self.a * s + self.b).long())


class OracleLength(Remedy):
    """Each output exactly as long, in pieces, as its reference (``--length oracle``;
    Newman et al. 2020): EOS is banned before and forced at that length."""

    def __init__(self, pieces: Tensor) -> None:
        self.pieces = pieces  # (B,) each sentence's reference length, within the model's

    def bounds(self, lengths: Lengths, src: Tensor) -> Lengths:
        return Lengths(self.pieces + 1, self.pieces)


def remedies_of(cfg: DecodeConfig, exact: Tensor | None = None) -> list[Remedy]:
    """The remedies of a decode section, in the order the search applies them:
    the bounds (least length, then the oracle's, which wins), the length penalty,
    then the terms (word reward, coverage, then ``decode.remedies`` in order);
    ``exact`` (B,): the oracle's lengths of the batch's sentences."""
    out: list[Remedy] = []
    if cfg.min_len_a or cfg.min_len_b:
        out.append(LeastLength(cfg.min_len_a, cfg.min_len_b))
    if exact is not None:
        out.append(OracleLength(exact))
    out.append(LengthPenalty(cfg.alpha))
    if cfg.word_reward:
        out.append(WordReward(cfg.word_reward))
    if cfg.coverage:
        out.append(Coverage(cfg.coverage))
    out += [registered(c) for c in cfg.remedies]
    return out


def registered(cfg: RemedyConfig) -> Remedy:
    """A ``decode.remedies`` entry as its registered class builds it from its config."""
    cls: Any = REMEDIES.get(cfg.kind)
    return cls(cfg)
