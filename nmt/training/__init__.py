"""Training regimes behind the ``TRAINERS`` registry (``train.trainer`` in a recipe)."""

from nmt.training import scheduled_sampling  # noqa: F401  (registers "scheduled_sampling")
from nmt.training.run import SUMMARY, train
from nmt.training.trainer import TRAINERS, Interrupted, Trainer

__all__ = ["SUMMARY", "TRAINERS", "Interrupted", "Trainer", "train"]
