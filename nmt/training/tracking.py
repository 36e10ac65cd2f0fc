"""``train.log_to``'s registry: how each tracker is checked before a run starts and
opened when it does (nmt.training.trackers: MLflow and W&B; nmt.training.tensorboard)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from nmt.training.tensorboard import log_dir, open_tensorboard, summary_writer
from nmt.training.trackers import MlflowLog, Tracker, WandbLog, import_extra

if TYPE_CHECKING:
    from nmt.setup.recipe import RunConfig


def check_tensorboard(cfg: RunConfig) -> None:
    summary_writer()
    log_dir(Path(cfg.run_dir), cfg.train.tensorboard_dir)


# train.log_to's names (but jsonl, which the trainer always writes): how to check a
# tracker before the run starts (its extra installed, its directory usable), and
# how to open it (cfg, run directory, the step a resumed run starts from)
TRACKERS: dict[str, tuple[Callable[[RunConfig], None], Callable[..., Tracker]]] = {
    "tensorboard": (check_tensorboard, open_tensorboard),
    "mlflow": (lambda cfg: import_extra("mlflow", "mlflow"), MlflowLog),
    "wandb": (lambda cfg: import_extra("wandb", "wandb"), WandbLog),
}


def check_trackers(cfg: RunConfig) -> None:
    """Before a run starts: every tracker's extra is installed (nothing trains in vain)."""
    for name in cfg.train.log_to:
        if name in TRACKERS:
            TRACKERS[name][0](cfg)


def open_trackers(cfg: RunConfig, resumed_step: int) -> Iterator[Tracker]:
    """The trackers ``train.log_to`` names, each opened as it is reached."""
    for name in cfg.train.log_to:
        if name in TRACKERS:
            yield TRACKERS[name][1](cfg, Path(cfg.run_dir), resumed_step)
