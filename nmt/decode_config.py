"""The recipe's ``decode`` section (search settings) and ``nmt translate --sample``'s
options: torch-free, so that reading a recipe loads no model code."""

from __future__ import annotations

from dataclasses import dataclass

from nmt.config import check, check_seed


@dataclass(frozen=True)
class DecodeConfig:
    """Search settings for validation, ``nmt translate`` and test evaluation."""

    beam: int = 5
    alpha: float = 1.0  # length penalty ((5 + len) / 6) ** alpha, Wu et al. 2016
    max_len_a: float = 1.5  # output length limit a * S + b
    max_len_b: int = 10
    batch_tokens: int = 8192
    n_best: int = 1
    # evaluate (and compare) with the mean of the last N kept checkpoints instead of
    # best.pt (nmt.averaging; needs train.keep_checkpoints >= N); 0: best.pt
    average_last: int = 0

    def __post_init__(self) -> None:
        check(1 <= self.beam <= 1024, "beam", "must be in 1..1024 (and at most the vocabulary)")
        check(0 <= self.alpha <= 100, "alpha", "must be in [0, 100]")
        check(0 <= self.max_len_a <= 1000, "max_len_a", "must be in 0..1000")
        check(1 <= self.max_len_b <= 2**20, "max_len_b", "must be in 1..1,048,576")
        check(1 <= self.batch_tokens <= 2**26, "batch_tokens", "must be in 1..67,108,864")
        check(1 <= self.n_best <= self.beam, "n_best", "must be between 1 and decode.beam")
        check(0 <= self.average_last <= 10_000, "average_last", "must be in 0..10,000")


@dataclass(frozen=True)
class Sampling:
    """Draw each token instead of searching (``nmt translate --sample``): from the
    model's distribution at ``temperature``, cut to the ``top_k`` most probable
    tokens (Fan et al. 2018; 0: no cut) and to the smallest set holding ``top_p`` of
    the probability (nucleus sampling, Holtzman et al. 2020; 1: no cut). Draws come
    from one generator seeded with ``seed``: the same input, settings and seed give
    the same output."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 1

    def __post_init__(self) -> None:
        check(0 < self.temperature <= 100, "temperature", "must be in (0, 100]")
        check(self.top_k >= 0, "top_k", "must be non-negative (0: no cut)")
        check(0 < self.top_p <= 1, "top_p", "must be in (0, 1] (1: no cut)")
        check_seed(self.seed, "seed")
