"""The recipe's ``model.attention`` section: each cross-attention variant's typed
options, and the registry that names the variants (their code is imported only
when a model is built; reading a recipe loads no torch)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from nmt.setup.config import RATIO_BOUNDS, check
from nmt.setup.registry import Registry

ATTENTION: Registry = Registry("attention kind", base="nmt.attention.base:CrossAttention")

ScoreName = Literal["dot", "general", "concat", "trilinear"]


@dataclass(frozen=True)
class AttentionConfig:
    """Base of every cross-attention variant's options (``model.attention``); each
    variant registers a subclass with its own typed options."""

    kind: str = "global"

    @property
    def score(self) -> ScoreName:
        """The score function; a variant with a ``score`` option declares it as a
        field, one without scores with the scaled dot product."""
        return "dot"

    def needs_left_to_right(self) -> bool:
        """Whether training assumes a left-to-right factorisation order (REINFORCE's
        reward to go)."""
        return False

    def from_data(self, lengths: np.ndarray) -> tuple[AttentionConfig, str | None]:
        """The config with values measured on the training data filled in, given its
        (source, target) lengths in pieces (N,2), and a line saying what was measured (None:
        nothing). The trainer calls it once, before building the model."""
        return self, None


@dataclass(frozen=True)
class GlobalConfig(AttentionConfig):
    kind: str = "global"
    score: ScoreName = "dot"


@dataclass(frozen=True)
class LocalConfig(AttentionConfig):
    window: int = 10  # w: the window spans 2w+1 source positions (Luong et al. used 10)
    score: ScoreName = "dot"
    path: Literal["auto", "windowed", "dense"] = "auto"

    def __post_init__(self) -> None:
        check(self.window >= 0, "window", "must be non-negative")


@dataclass(frozen=True)
class LocalMConfig(LocalConfig):
    kind: str = "local_m"
    # identity: p_t = t; length_ratio: p_t = t / ratio, where ratio is the mean
    # target/source length ratio (null: measured on the training data by the trainer)
    center: Literal["identity", "length_ratio"] = "identity"
    ratio: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check(self.ratio is None or 0.01 <= self.ratio <= 100, "ratio", RATIO_BOUNDS)

    def inert_keys(self) -> dict[str, str]:
        if self.center == "length_ratio":
            return {}
        return {"ratio": f"only center length_ratio uses it (center is {self.center!r})"}

    def from_data(self, lengths: np.ndarray) -> tuple[LocalMConfig, str | None]:
        if self.center != "length_ratio" or self.ratio is not None:
            return self, None
        ratio = sum(t / s for s, t in lengths.tolist()) / len(lengths)
        measured = f"{ratio:.3f} (mean target/source length on the training data)"
        return replace(self, ratio=ratio), f"model.attention.ratio = {measured}"


@dataclass(frozen=True)
class LocalPConfig(LocalConfig):
    kind: str = "local_p"
    gaussian: Literal["multiply", "bias"] = "multiply"
    per_head: bool = True  # one predicted centre per head, or one shared by all heads


@dataclass(frozen=True)
class LocalSConfig(LocalPConfig):
    kind: str = "local_s"
    # each query moves the centre on by max_step·sigmoid(·): a non-negative step of
    # at most this many source positions (1 at the start of training)
    max_step: float = 2.0

    def __post_init__(self) -> None:
        super().__post_init__()
        check(0 < self.max_step <= 1000, "max_step", "must be in (0, 1000]")


@dataclass(frozen=True)
class HardConfig(AttentionConfig):
    kind: str = "hard"
    score: ScoreName = "dot"
    estimator: Literal["reinforce", "straight_through", "gumbel"] = "gumbel"
    entropy_weight: float = 0.01  # λ_e, REINFORCE only
    baseline_decay: float = 0.9  # moving-average baseline b ← decay·b + (1 − decay)·R
    expected_prob: float = 0.0  # REINFORCE: probability of the soft context instead
    tau: float = 1.0  # Gumbel-softmax start temperature
    tau_min: float = 0.5
    anneal: float = 1e-4

    def __post_init__(self) -> None:
        check(0 <= self.entropy_weight <= 100, "entropy_weight", "must be in [0, 100]")
        check(0 <= self.baseline_decay < 1, "baseline_decay", "must be in [0, 1)")
        check(0 <= self.expected_prob <= 1, "expected_prob", "must be in [0, 1]")
        # far below 1e-6 the relaxed weights are one-hot anyway and scores / τ head for
        # float32's overflow (inf − inf = NaN in the softmax)
        check(1e-6 <= self.tau <= 100, "tau", "must be in 1e-6..100")
        check(1e-6 <= self.tau_min <= self.tau, "tau_min", "must be in 1e-6..tau")
        check(0 <= self.anneal <= 1, "anneal", "must be in [0, 1]")

    def needs_left_to_right(self) -> bool:
        return self.estimator == "reinforce"

    def inert_keys(self) -> dict[str, str]:
        est = self.estimator
        inert = {}
        if est != "reinforce":
            why = f"only estimator reinforce uses it (estimator is {est!r})"
            inert.update(entropy_weight=why, baseline_decay=why, expected_prob=why)
        if est != "gumbel":
            why = f"only estimator gumbel uses it (estimator is {est!r})"
            inert.update(tau=why, tau_min=why, anneal=why)
        return inert


@dataclass(frozen=True)
class SparsemaxConfig(AttentionConfig):
    kind: str = "sparsemax"
    score: ScoreName = "dot"


# The built-in variants: config, and the class imported when a model is built.
ATTENTION.register("global", GlobalConfig, "nmt.attention.global_attention:GlobalAttention")
ATTENTION.register("local_m", LocalMConfig, "nmt.attention.local:LocalMonotonicAttention")
ATTENTION.register("local_p", LocalPConfig, "nmt.attention.local:LocalPredictiveAttention")
ATTENTION.register("local_s", LocalSConfig, "nmt.attention.local:LocalStepAttention")
ATTENTION.register("hard", HardConfig, "nmt.attention.hard:HardAttention")
ATTENTION.register("sparsemax", SparsemaxConfig, "nmt.attention.sparsemax:SparsemaxAttention")
