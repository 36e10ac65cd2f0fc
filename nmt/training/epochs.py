"""Each epoch's training pairs and its batches, shared out between ranks."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from nmt.data.batching import ParallelData
from nmt.data.joining import joined
from nmt.data.subword_sampling import resampled
from nmt.errors import NmtError
from nmt.training.curriculum import LengthLimit, next_group

if TYPE_CHECKING:
    from nmt.setup.recipe import RunConfig
    from nmt.training.build import TrainingData


@dataclass(frozen=True)
class EpochPlan:
    """One epoch's training pairs (they differ by epoch under subword sampling and
    ``data.join``) and its batches; under a length curriculum, each batch's longest
    pair and the limits drawn from these very pairs."""

    epoch: int
    pairs: ParallelData
    batches: list[np.ndarray]
    longest: np.ndarray | None = None  # (batches,)
    limit: LengthLimit | None = None


class EpochPlans:
    """The batches of one epoch at a time, kept for the epoch in progress: on
    millions of pairs a plan takes seconds."""

    def __init__(self, data: TrainingData, cfg: RunConfig, world: int) -> None:
        self.data = data
        self.cfg = cfg
        self.world = world
        self._plan: EpochPlan | None = None
        self.resample_seconds = 0.0  # spent segmenting epochs anew (data.vocab.sampling)

    def plan(self, epoch: int) -> list[np.ndarray]:
        """The epoch's batches, cut to a multiple of the number of ranks so that every
        rank takes part in every update (at most world − 1 batches an epoch are left
        out)."""
        if self._plan is None or self._plan.epoch != epoch:
            t = self.cfg.train
            pairs = self._pairs_of(epoch)
            plan = pairs.epoch_batches(t.batch_tokens, t.seed, epoch, t.batching == "bucketed")
            if len(plan) < self.world:  # cut to a multiple of the ranks, it would be empty
                raise NmtError(
                    f"an epoch of the training data makes {len(plan)} batch(es) of "
                    f"train.batch_tokens {t.batch_tokens:,}, fewer than the {self.world} ranks "
                    "that each need one: lower train.batch_tokens or use fewer ranks (--nproc)"
                )
            plan = plan[: len(plan) - len(plan) % self.world]
            self._plan = EpochPlan(epoch, pairs, plan)
            if (curriculum := t.length_curriculum) is not None:
                # the limits from the pairs this epoch trains on: joined examples and
                # an epoch's own segmentation are as long as they are, not as the
                # prepared pairs were
                longest = np.array([pairs.lengths[b].max() for b in plan])
                limit = LengthLimit(curriculum, pairs.lengths)
                self._plan = EpochPlan(epoch, pairs, plan, longest, limit)
        return self._plan.batches

    def group(self, start: int, count: int, step: int) -> np.ndarray:
        """Positions in the current plan of update ``step`` + 1's ``count`` batches
        from ``start``: the next ones, or under ``train.length_curriculum`` the next
        ones within the update's length limit. Empty when the epoch has none left."""
        plan = self._plan
        assert plan is not None, "plan() first"
        if plan.limit is None or plan.longest is None:
            return np.arange(start, min(start + count, len(plan.batches)))
        return next_group(plan.longest, start, count, self.world, plan.limit.at(step + 1))

    @property
    def pairs(self) -> ParallelData:
        """The training pairs of the epoch whose plan was made last."""
        assert self._plan is not None, "plan() first"
        return self._plan.pairs

    def _pairs_of(self, epoch: int) -> ParallelData:
        """The prepared pairs, or under ``data.vocab.sampling`` the epoch's own
        segmentation of them (nmt.data.subword_sampling); under ``data.join``, some
        of them joined (nmt.data.joining)."""
        d, seed = self.cfg.data, self.cfg.train.seed
        pairs = self.data.train
        if d.vocab.sampling is not None:
            start, v = time.perf_counter(), self.data.vocabs
            pairs = resampled(pairs, v.src, v.tgt, d.vocab.sampling, seed, epoch, d.max_len)
            self.resample_seconds += time.perf_counter() - start
        if d.join.prob > 0:
            v = self.data.vocabs
            pairs = joined(
                pairs, d.join, d.max_len, seed, epoch, (v.src.separator, v.tgt.separator)
            )
        return pairs
