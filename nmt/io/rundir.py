"""A run directory belongs to one training process at a time, and a resume continues
the run its checkpoint describes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import portalocker

from nmt.errors import NmtError

LOCK = "lock"  # holds the owner's pid; the advisory lock, not the file, is what counts


def is_run(directory: Path) -> bool:
    """Whether ``directory`` holds a training run (its checkpoints)."""
    return any((directory / name).exists() for name in ("best.pt", "last.pt"))


# Keys a resumed run may change: budgets, logging, validation, how it runs, decoding.
# Everything else describes the model, its data or its optimisation, which the
# checkpoint already fixes.
RUN_TIME_KEYS = (
    "run_dir",
    "plugins",  # where the plug-ins' code is now (--plugin stands in for a moved one)
    "data.cache_dir",
    "train.max_steps",
    "train.max_epochs",
    "train.max_minutes",
    "train.patience",
    "train.log_every",
    "train.log_to",
    "train.tensorboard_dir",
    "train.mlflow_uri",
    "train.wandb_dir",
    "train.experiment",
    "train.run_name",
    "train.tags",
    "train.log_checkpoint",
    "train.valid_every",
    "train.save_every",
    "train.keep_checkpoints",
    "train.valid_bleu",
    "train.max_bad_steps",
    "train.compile",
    "train.kernels",
    "train.precision",
    "decode.",
)


def make_run_dir(run_dir: Path, key: str = "run_dir") -> None:
    if run_dir.exists() and not run_dir.is_dir():
        raise NmtError(f"{key}: {run_dir}: a file, not a directory; choose another {key}")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise NmtError(f"{key}: {run_dir}: cannot create ({e.strerror or e})") from None


@contextmanager
def owned(run_dir: Path, key: str = "run_dir", lock: str = LOCK) -> Iterator[None]:
    """Hold ``run_dir`` for the duration (an advisory lock through portalocker, which
    the system releases when the process dies, so ``kill -9`` leaves no stale lock); a second
    process gets an error naming the directory, the owner's pid and the ``key`` that
    chooses another directory. A directory this call created is removed again if the
    work fails before writing anything there, so a refused run leaves no trace.
    ``lock``: the lock file's name (a corpus directory's is hidden)."""
    created = not run_dir.exists()
    make_run_dir(run_dir, key)
    try:
        f = open(run_dir / lock, "a+b")  # created if absent, its owner's pid kept
    except OSError as e:
        raise NmtError(f"{run_dir / lock}: cannot create ({e.strerror or e})") from None
    try:
        try:
            portalocker.lock(f, portalocker.LOCK_EX | portalocker.LOCK_NB)
        except portalocker.exceptions.LockException:
            f.seek(0)
            owner = f.read(32).decode("ascii", "replace").strip() or "unknown"
            raise NmtError(
                f"{run_dir}: in use by another nmt process (pid {owner}); wait for it to "
                f"finish or set {key} to a new directory"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(f"{os.getpid()}\n".encode("ascii"))
        f.flush()
        try:
            yield
        except BaseException:
            with suppress(OSError):  # another process may have come in meanwhile
                if created and [p.name for p in run_dir.iterdir()] == [lock]:
                    (run_dir / lock).unlink()
                    run_dir.rmdir()
            raise
    finally:
        f.close()  # releases the lock


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested recipe dict -> {"model.attention.kind": ..., ...}."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = list(value) if isinstance(value, tuple) else value
    return out


def recipe_changes(old: dict[str, Any], new: dict[str, Any], checkpoint: Path) -> list[str]:
    """The keys a resume changes, as ``key old -> new``; an error naming every change
    that is not a run-time key (:data:`RUN_TIME_KEYS`)."""
    before, after = flatten(old), flatten(new)
    keys = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    changed = {k: f"{k} {before.get(k)!r} -> {after.get(k)!r}" for k in keys}
    refused = [line for k, line in changed.items() if not k.startswith(RUN_TIME_KEYS)]
    schedule = after.get("train.lr_schedule")
    if "train.max_steps" in changed and schedule in ("cosine", "linear"):
        raise NmtError(
            f"{checkpoint}: --resume with {changed['train.max_steps']}: under "
            f"train.lr_schedule {schedule} the learning rate decays over max_steps, so a "
            "new budget changes the rate of every update from here (and jumps it mid-way): "
            "start a new run_dir, or resume with the run's own max_steps"
        )
    if refused:
        raise NmtError(
            f"{checkpoint}: --resume with a recipe that changes the run: {'; '.join(refused)}"
            " (a resume may change only budgets, logging, validation and decoding keys; "
            "start a new run_dir for the rest)"
        )
    return list(changed.values())
