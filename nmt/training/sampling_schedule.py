"""Scheduled sampling's options and its schedules for ε_i, the probability of feeding
the gold token (Bengio et al. 2015, sec. 2.4)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from nmt.config import check
from nmt.training.config import TrainerConfig


@dataclass(frozen=True)
class ScheduledSamplingConfig(TrainerConfig):
    """``train.trainer`` with ``kind: scheduled_sampling``: two-pass scheduled sampling
    (Mihaylova & Martins 2019); ``passes`` > 2 is Duckworth et al. 2019's parallel
    scheduled sampling."""

    schedule: Literal["linear", "exponential", "inverse_sigmoid", "constant"] = "inverse_sigmoid"
    # linear: start (<= 1); exponential: base (< 1); inverse_sigmoid: k >= 1; constant: ε.
    # null: the schedule's default (DEFAULT_K), one that decays; constant needs a value.
    k: float | None = None
    c: float = 1e-4  # linear: decrease per step
    eps_min: float = 0.0  # linear: floor
    warmup_steps: int = 0  # pure teacher forcing first
    mix: Literal["argmax", "sample", "topk", "softmax", "gumbel"] = "softmax"
    topk: int = 5
    temperature: float = 1.0  # softmax and gumbel
    passes: int = 2
    first_pass_grad: bool = False

    def __post_init__(self) -> None:
        s = self.schedule
        check(self.k is not None or s != "constant", "k", "constant schedule needs k (ε, 0..1)")
        if self.k is None:
            object.__setattr__(self, "k", DEFAULT_K[s])
        if s == "exponential":
            check(0 < self.k < 1, "k", "exponential schedule needs 0 < k < 1")
        elif s == "inverse_sigmoid":
            check(self.k >= 1, "k", "inverse_sigmoid schedule needs k >= 1")
        elif s == "constant":
            check(0 <= self.k <= 1, "k", "constant schedule needs 0 <= k <= 1")
        else:  # linear: max(eps_min, k − c·i) must fall below 1
            check(
                0 <= self.k <= 1,
                "k",
                "linear schedule starts at 0 <= k <= 1 (delay it with warmup_steps)",
            )
            check(self.c > 0, "c", "linear schedule needs c > 0, else ε stays k")
            check(self.eps_min < 1, "eps_min", "linear schedule needs eps_min < 1, else ε stays 1")
        check(self.c >= 0, "c", "must be non-negative")
        check(0 <= self.eps_min <= 1, "eps_min", "must be in [0, 1]")
        check(self.warmup_steps >= 0, "warmup_steps", "must be non-negative")
        check(self.topk >= 1, "topk", "must be at least 1")
        # Below 1e-3, logits / temperature overflow float32 (inf − inf = NaN in the mix).
        check(1e-3 <= self.temperature <= 100, "temperature", "must be in 0.001..100")
        check(self.passes >= 2, "passes", "must be at least 2")

    def inert_keys(self) -> dict[str, str]:
        inert = {}
        if self.schedule != "linear":
            why = f"only schedule linear uses it (schedule is {self.schedule!r})"
            inert.update(c=why, eps_min=why)
        if self.mix != "topk":
            inert["topk"] = f"only mix topk uses it (mix is {self.mix!r})"
        if self.mix not in ("softmax", "gumbel"):
            inert["temperature"] = f"only mix softmax and gumbel use it (mix is {self.mix!r})"
        return inert


# ε_i = 1 − o(1) at the start, falling over a few thousand updates: linear reaches 0.9
# after 1,000 updates (c = 1e-4), exponential after ~1,050, inverse sigmoid (Bengio et
# al. 2015's curve) after ~10,800.
DEFAULT_K = {"linear": 1.0, "exponential": 0.9999, "inverse_sigmoid": 2000.0}


def gold_probability(cfg: ScheduledSamplingConfig, step: int) -> float:
    """ε_i at training step ``step`` (0-based), clipped to [0, 1]."""
    if step < cfg.warmup_steps:
        return 1.0
    i = step - cfg.warmup_steps
    if cfg.schedule == "linear":
        eps = max(cfg.eps_min, cfg.k - cfg.c * i)
    elif cfg.schedule == "exponential":
        eps = cfg.k**i
    elif cfg.schedule == "inverse_sigmoid":
        eps = cfg.k / (cfg.k + math.exp(min(i / cfg.k, 700.0)))
    else:
        eps = cfg.k
    return min(1.0, max(0.0, eps))
