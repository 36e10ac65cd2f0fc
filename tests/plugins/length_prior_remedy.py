"""A user's decoding remedy, written outside the nmt package: a prior on the output's
length, −weight·|length − ratio·source pieces| added to every hypothesis's score
(a soft version of the oracle length, known without a reference).

tests/decoding/test_remedies.py imports it as a plug-in and decodes with
``decode.remedies: [{kind: length_prior, weight: 2.0}]``."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from nmt.data.vocab import EOS, PAD
from nmt.decoding.remedies import Remedy, State
from nmt.setup.decoding import REMEDIES, RemedyConfig


@dataclass(frozen=True)
class LengthPriorConfig(RemedyConfig):
    kind: str = "length_prior"
    weight: float = 1.0
    ratio: float = 1.0


@REMEDIES.register("length_prior", config=LengthPriorConfig)
class LengthPrior(Remedy):
    def __init__(self, cfg: LengthPriorConfig) -> None:
        self.weight, self.ratio = cfg.weight, cfg.ratio

    def begin(self, src: Tensor) -> State:
        return (((src != PAD) & (src != EOS)).sum(1).float(),)  # (B,) source pieces

    def term(self, state: State, length: Tensor, attention, finished) -> tuple[Tensor, State]:
        (pieces,) = state
        return -self.weight * (length - self.ratio * pieces).abs(), state
