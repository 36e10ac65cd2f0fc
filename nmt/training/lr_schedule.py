"""The learning-rate schedule (``train.lr`` and ``train.warmup``)."""

from __future__ import annotations

import math


def inverse_sqrt(step: int, peak: float, warmup: int) -> float:
    """Linear warm-up to ``peak`` over ``warmup`` steps, then peak·sqrt(warmup/step)
    (Vaswani et al. 2017, eq. 3, with the peak made explicit)."""
    step = max(step, 1)
    if warmup == 0:
        return peak / math.sqrt(step)
    return peak * min(step / warmup, math.sqrt(warmup / step))
