"""The learning-rate schedules (``train.lr_schedule``, ``train.lr``, ``train.warmup``).

Every schedule warms up linearly to the peak ``train.lr`` over ``train.warmup``
updates. After it, ``inverse_sqrt`` decays as 1/sqrt(step) with no end (Vaswani
et al. 2017, eq. 3, with the peak made explicit); ``cosine`` (Loshchilov & Hutter
2017, one cycle) and ``linear`` decay towards zero over ``train.max_steps``: a
schedule that knows its budget ends annealed, which at a short budget is worth
more than an open-ended one (Li, Yumer & Ramanan 2020, "Budgeted training"). The
decay reaches zero one update after the budget, so that its last update still
moves the parameters (at zero it would be a wasted update).
"""

from __future__ import annotations

import math
from collections.abc import Callable

# (step, peak, warmup, total) -> the learning rate of update ``step`` (1-based)
Schedule = Callable[[int, float, int, int | None], float]


def inverse_sqrt(step: int, peak: float, warmup: int, total: int | None = None) -> float:
    """peak·min(step/warmup, sqrt(warmup/step)); peak/sqrt(step) without warm-up."""
    step = max(step, 1)
    if warmup == 0:
        return peak / math.sqrt(step)
    return peak * min(step / warmup, math.sqrt(warmup / step))


def _decay(shape: Callable[[float], float]) -> Schedule:
    """Warm-up, then peak·shape(f) with f the fraction of the decay done, 0 to 1."""

    def schedule(step: int, peak: float, warmup: int, total: int | None) -> float:
        step = max(step, 1)
        if step <= warmup:
            return peak * step / warmup
        assert total is not None, "a decaying schedule needs train.max_steps"
        done = min((step - warmup) / (max(total, warmup) - warmup + 1), 1.0)
        return peak * shape(done)

    return schedule


SCHEDULES: dict[str, Schedule] = {
    "inverse_sqrt": inverse_sqrt,
    "cosine": _decay(lambda f: 0.5 * (1 + math.cos(math.pi * f))),
    "linear": _decay(lambda f: 1 - f),
}
