"""``train.log_to``'s registry: how each tracker is checked before a run starts and
opened when it does (nmt.training.trackers: MLflow and W&B; nmt.training.tensorboard)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from nmt.training.tensorboard import log_dir, open_tensorboard, summary_writer
from nmt.training.trackers import MlflowLog, Tracker, WandbLog, import_extra, result_metrics

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


KEEP_RESULTS = ("mlflow", "wandb")  # the trackers that keep a run's scores and files


def check_trackers(cfg: RunConfig) -> None:
    """Before a run starts: every tracker's extra is installed (nothing trains in vain)."""
    for name in cfg.train.log_to:
        if name in TRACKERS:
            TRACKERS[name][0](cfg)


def publish_results(run_dir: str | Path) -> None:
    """After a run's evaluation: the trackers of its recipe that keep results (MLflow,
    W&B) get every split's scores (``test/SPLIT/METRIC``) and the run's files, in the
    run they logged its training to; a tracker that fails is one warning. A run that
    logs to neither costs a read of its recipe."""
    from nmt.decoding.evaluate import read_results
    from nmt.errors import ConfigError, NmtError
    from nmt.progress import warn
    from nmt.setup.config import read_yaml
    from nmt.setup.recipe import config_from_dict

    run_dir, path = Path(run_dir), Path(run_dir) / "recipe.yaml"
    if not path.is_file():  # no recipe kept, no tracker known
        return
    try:
        cfg = config_from_dict(read_yaml(path), str(path))
    except (ConfigError, NmtError) as e:
        warn(f"{path}: {e}; the run's trackers get no results")
        return
    names = [n for n in cfg.train.log_to if n in KEEP_RESULTS]
    if not names:
        return
    scores = result_metrics(read_results(run_dir))
    files = [run_dir / f for f in ("recipe.yaml", "results.json", "summary.json")]
    files += sorted(run_dir.glob("spm*.model"))
    if cfg.train.log_checkpoint:
        files.append(run_dir / "best.pt")
    for name in names:
        tracker = TRACKERS[name][1](cfg, run_dir, 0)
        tracker.results(scores, [f for f in files if f.is_file()])
        tracker.close(finished=True)


def open_trackers(cfg: RunConfig, resumed_step: int) -> Iterator[Tracker]:
    """The trackers ``train.log_to`` names, each opened as it is reached."""
    for name in cfg.train.log_to:
        if name in TRACKERS:
            yield TRACKERS[name][1](cfg, Path(cfg.run_dir), resumed_step)
