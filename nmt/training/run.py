"""One entry point for training a recipe, shared by ``nmt train`` and ``nmt compare``:
own the run directory, build, check a resume against its checkpoint, train."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from nmt.data.pipeline import check_files
from nmt.errors import ConfigError, NmtError, brief
from nmt.io import checkpoint, files
from nmt.io.files import is_number
from nmt.io.rundir import make_run_dir, owned
from nmt.progress import console
from nmt.setup.device import resolve_device
from nmt.training.build import build
from nmt.training.distributed import Distributed, from_env
from nmt.training.signals import Interrupted, watch_parent
from nmt.training.tracking import check_trackers
from nmt.training.trainer import Trainer

if TYPE_CHECKING:
    from nmt.setup.recipe import RunConfig

__all__ = ["SUMMARY", "Interrupted", "Trainer", "prepare", "read_summary", "train"]

SUMMARY = "summary.json"  # written when training ends; its presence marks a finished run


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    """``RUN/summary.json``, None before training ends; an error naming it when it is
    damaged (unreadable, or without the figures every summary holds)."""
    path = Path(run_dir) / SUMMARY
    summary = files.read_json(path)
    if summary is None:
        return None
    figures = ("steps", "elapsed_s", "tokens_per_s")
    if not isinstance(summary, dict) or not all(is_number(summary.get(k)) for k in figures):
        raise NmtError(f"{path}: damaged (not a summary of training)")
    return summary


def prepare(
    cfg: RunConfig,
    device: torch.device | str = "auto",
    resume: bool = False,
    dist: Distributed = Distributed(),
) -> Trainer:
    """Everything before the first update: check the run directory, build the model
    and its data, check a resume against its checkpoint, write ``recipe.yaml``, and
    return the recipe's trainer (restored when resuming)."""
    device = resolve_device(device) if isinstance(device, str) else device
    log = console.print if dist.main else lambda *args, **kwargs: None
    run_dir = Path(cfg.run_dir)
    check_files(cfg.data)
    check_trackers(cfg)
    last = run_dir / "last.pt"
    if resume and not last.is_file():
        raise NmtError(f"{last}: nothing to resume (no last.pt in run_dir)")
    if not resume and last.exists():
        raise NmtError(
            f"{run_dir}: already holds a run; add --resume to continue it "
            "or set run_dir to a new directory"
        )
    make_run_dir(run_dir)
    ckpt = checkpoint.load(last) if resume else None
    if ckpt is not None:
        # under train.ema, "model" is the average and the trained weights are beside it
        weights = [k for k in ("model", "training_weights") if k in ckpt or k == "model"]
        kinds = {"config": dict, "vocab": dict, "state": dict, **dict.fromkeys(weights, dict)}
        checkpoint.check_entries(ckpt, last, {**kinds, "optimizer": dict, "rng": list})
        for key in weights:
            checkpoint.check_finite(ckpt[key], last)
    model, data, cfg = build(cfg, log, (last, ckpt) if ckpt is not None else None, dist, device)
    trainer = Trainer(model, data, cfg, device, dist, log)
    if ckpt is not None:
        if dist.main and (n := files.remove_stale_temps(run_dir)):
            log(f"removed {n} temp file(s) left by an interrupted write")
        for key in weights:
            checkpoint.check_dtypes(ckpt[key], model.state_dict(), last)
        try:
            trainer.restore(ckpt)
        except (ConfigError, KeyError, TypeError, ValueError, RuntimeError, IndexError) as e:
            what = f"no {e} entry" if isinstance(e, KeyError) else brief(e)
            raise NmtError(f"{last}: damaged, cannot resume from it ({what})") from None
    if dist.main:  # once the run is sure to go on
        files.write_text(run_dir / "recipe.yaml", cfg.to_yaml())
    log(trainer.describe())
    return trainer


def train(cfg: RunConfig, device: str = "auto", resume: bool = False) -> dict[str, Any] | None:
    """Train with the recipe's trainer. The main process owns the run directory while
    it trains, writes ``RUN/summary.json`` and returns the summary; other
    data-parallel ranks return None."""
    where = resolve_device(device)
    dist = from_env(where.type)
    # a rank whose launcher is killed outright stops too, as does a run whose parent
    # asked for it (benchmarks/time_to_quality.py)
    if dist.enabled or os.environ.get("NMT_WATCH_PARENT") == "1":
        watch_parent()
    try:
        if dist.enabled and where.type == "cuda":
            where = torch.device("cuda", dist.local_rank)
        if where.type == "cuda" and where.index is not None:
            torch.cuda.set_device(where)
        with owned(Path(cfg.run_dir)) if dist.main else nullcontext(), lost_peers(dist):
            summary = run_to_the_end(prepare(cfg, where, resume, dist))
            if not dist.main:
                return None
            text = json.dumps(summary, indent=2) + "\n"
            files.write_text(Path(cfg.run_dir) / SUMMARY, text)
            return summary
    finally:
        dist.close()


@contextmanager
def lost_peers(dist: Distributed) -> Iterator[None]:
    """A collective that fails because another rank stopped (gloo's "connection closed
    by peer", NCCL's errors) as one line naming this rank, instead of the backend's
    traceback; the rank that stopped first says why on its own."""
    try:
        yield
    except RuntimeError as e:
        text = str(e)
        if not dist.enabled or not any(w in text for w in ("gloo", "Gloo", "NCCL", "peer")):
            raise
        first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
        first = re.sub(r"^\[[^\]]*\]\s*", "", first)[:120]  # the backend's source location
        raise NmtError(
            f"rank {dist.rank} of {dist.world}: another rank stopped, so this one stops "
            f"too ({first})"
        ) from None


def run_to_the_end(trainer: Trainer) -> dict[str, Any]:
    """``trainer.run()``, then the DDP module the trainer holds is destroyed, however
    the run ended, while its process group still lives: destroyed after the group, it
    could leave a rank waiting at exit for good."""
    try:
        return trainer.run()
    finally:
        trainer.ddp = None
