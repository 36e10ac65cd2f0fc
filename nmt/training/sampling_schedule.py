"""Scheduled sampling's options and its schedules for ε_i, the probability of feeding
the gold token (Bengio et al. 2015, sec. 2.4)."""

from __future__ import annotations

import math

from nmt.training.config import ScheduledSamplingConfig


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
