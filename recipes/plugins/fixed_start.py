"""A position scheme for the SHAPE study of docs/results.md ("Why SHAPE costs"):
the sinusoids of Vaswani et al. 2017, every sequence's positions starting at one
fixed offset, ``model.positions.start``, in training and in decoding alike.

SHAPE (Kiyono et al. 2021) starts them at a random offset in 0..shift in training.
Beside it this scheme separates the two things a shift of 100 changes: the offsets
are random, and the model reads positions up to 100 past its sentences' lengths. A
start of 100 keeps the second and drops the first. A plug-in, not one of nmt's
schemes: a spec names it in ``plugins`` (recipes/compare-multi30k-train-short-shape-start.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from nmt.model.positions import AbsolutePositions, PositionScheme, SinusoidTable
from nmt.setup.config import check
from nmt.setup.model import MAX_SHIFT, POSITIONS, PositionsConfig


@dataclass(frozen=True)
class FixedStartConfig(PositionsConfig):
    start: int = 0  # every sequence's first position, in training and in decoding

    def __post_init__(self) -> None:
        super().__post_init__()
        check(0 <= self.start <= MAX_SHIFT, "start", f"must be in 0..{MAX_SHIFT:,}")

    def absolute(self) -> bool:
        return True  # added to the embeddings, as sinusoidal's are


class StartedTable(SinusoidTable):
    """The sinusoid table, read from row ``start`` on: position p is row start + p."""

    def __init__(self, rows: int, d_model: int, start: int) -> None:
        super().__init__(rows + start, d_model)
        self.start = start

    def forward(self, L: int, offset: int | Tensor) -> Tensor:
        return super().forward(L, offset + self.start)


@POSITIONS.register("sinusoidal_from", config=FixedStartConfig)
class SinusoidalFrom(PositionScheme):
    @staticmethod
    def embeddings(cfg: PositionsConfig, max_positions: int, d_model: int) -> AbsolutePositions:
        assert isinstance(cfg, FixedStartConfig)  # the config registered with the kind
        return StartedTable(max_positions + cfg.shift, d_model, cfg.start)
