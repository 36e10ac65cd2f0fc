"""One entry point for training a recipe, shared by ``nmt train`` and ``nmt compare``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nmt.checkpoint import write_text
from nmt.training import scheduled_sampling  # noqa: F401  (registers its trainer)
from nmt.training.trainer import TRAINERS, Interrupted, Trainer

if TYPE_CHECKING:
    from nmt.recipe import RunConfig

__all__ = ["SUMMARY", "TRAINERS", "Interrupted", "Trainer", "train"]

SUMMARY = "summary.json"  # written when training ends; its presence marks a finished run


def train(cfg: RunConfig, device: str = "auto", resume: bool = False) -> dict[str, Any] | None:
    """Train with the recipe's trainer. The main process writes ``RUN/summary.json`` and
    returns the summary; other data-parallel ranks return None."""
    trainer = TRAINERS.get(cfg.train.trainer)(cfg, device=device, resume=resume)
    summary = trainer.run()
    if not trainer.dist.main:
        return None
    write_text(Path(cfg.run_dir) / SUMMARY, json.dumps(summary, indent=2) + "\n")
    return summary
