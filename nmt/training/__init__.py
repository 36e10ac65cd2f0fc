"""Training regimes behind the ``TRAINERS`` registry (``train.trainer`` in a recipe)."""

from nmt.training import scheduled_sampling  # noqa: F401  (registers "scheduled_sampling")
from nmt.training.trainer import TRAINERS, Interrupted, Trainer

__all__ = ["TRAINERS", "Interrupted", "Trainer"]
