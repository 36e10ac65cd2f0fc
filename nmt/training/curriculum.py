"""A length curriculum: short pairs first, longer ones as training goes on.

Competence-based curriculum learning (Platanios et al. 2019, "Competence-based
Curriculum Learning for Neural Machine Translation", NAACL) with sentence length as
the difficulty. A pair's difficulty is the share of training pairs no longer than it
(the longer side, as the batch budget counts it). At update t the model's competence
is the square-root schedule of the paper,

    c(t) = min(1, sqrt(t · (1 − c0²) / T + c0²)),

c0 = ``start`` and T = ``steps``, and update t (counted from 1) draws only from pairs
of difficulty at most c(t): update T is the first to draw from every pair. The
difficulties are those of the epoch's own pairs (joined examples under ``data.join``,
an epoch's segmentation under subword sampling). Here the draw is the epoch's own
batch plan, in its order, passing over the batches whose longest pair is beyond the
competence: the batches are length-bucketed, so a batch's longest pair stands for all
of it. Which batches an update takes is then a pure function of the plan and the
update count, so a resume continues exactly and every DDP rank passes over the same
batches.
"""

from __future__ import annotations

import math

import numpy as np

from nmt.setup.training import LengthCurriculum


def competence(curriculum: LengthCurriculum, update: int) -> float:
    """c(update): the share of the training pairs, shortest first, that update number
    ``update`` (counted from 1) may draw from; 1 from update ``steps`` on."""
    if update >= curriculum.steps:  # exactly 1, not a rounding below it
        return 1.0
    c0 = curriculum.start
    return math.sqrt(update * (1 - c0 * c0) / curriculum.steps + c0 * c0)


class LengthLimit:
    """The longest pair each update may take, from the training pairs' lengths."""

    def __init__(self, curriculum: LengthCurriculum, lengths: np.ndarray) -> None:
        self.curriculum = curriculum
        self.sorted = np.sort(np.asarray(lengths).max(1))  # (N,2) -> each pair's longer side

    def at(self, update: int) -> float:
        """The length limit of update number ``update`` (infinite once competence is 1)."""
        c = competence(self.curriculum, update)
        if c >= 1:
            return math.inf
        return float(self.sorted[max(1, math.ceil(c * len(self.sorted))) - 1])


def next_group(longest: np.ndarray, start: int, count: int, world: int, limit: float) -> np.ndarray:
    """Positions in an epoch's plan of the next update's batches: the first ``count``
    from ``start`` whose longest pair (``longest``, one per batch of the plan) is within
    ``limit``, cut to a multiple of ``world`` so that every rank gets its share. Empty
    when fewer than ``world`` are left: the epoch is over for this limit. Every plan
    has ``world`` batches within any limit (``floor``), so a new epoch always starts."""
    if math.isinf(limit):
        taken = np.arange(start, min(start + count, len(longest)))
    else:
        taken = start + np.flatnonzero(longest[start:] <= max(limit, floor(longest, world)))
        taken = taken[:count]
    return taken[: len(taken) - len(taken) % world]


def floor(longest: np.ndarray, world: int) -> float:
    """The lowest limit under which ``world`` batches of the plan qualify (a limit
    below every batch would leave an epoch with nothing to train on)."""
    if len(longest) < world:
        return math.inf
    return float(np.partition(longest, world - 1)[world - 1])
