"""Checkpoint averaging: the mean of every floating-point tensor of several
checkpoints of one run (Vaswani et al. 2017, sec. 6.1, averaged the last 5 or 20;
Popel & Bojar 2018).

A run keeps its last ``train.keep_checkpoints`` validation checkpoints as
``RUN/step-STEP.pt``; ``nmt average`` and ``decode.average_last`` read them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch

from nmt.errors import NmtError
from nmt.io import checkpoint
from nmt.io.rundir import is_run
from nmt.model.load import model_from_payload

KEPT = re.compile(r"step-(\d+)\.pt")
# entries of a checkpoint that an average does not carry: the file's format, and
# what only a resume reads (optimiser, RNG, train.ema's trained weights)
NOT_CARRIED = ("format", "version", "optimizer", "rng", "training_weights")


def kept_name(step: int) -> str:
    return f"step-{step}.pt"


def kept_checkpoints(run_dir: Path) -> list[Path]:
    """``RUN/step-STEP.pt`` files, oldest first."""
    found = [
        (int(m.group(1)), p) for p in run_dir.glob("step-*.pt") if (m := KEPT.fullmatch(p.name))
    ]
    return [p for _, p in sorted(found)]


def prune(run_dir: Path, keep: int) -> None:
    """Delete all but the newest ``keep`` (at least 1) kept checkpoints."""
    for path in kept_checkpoints(run_dir)[:-keep]:
        path.unlink(missing_ok=True)


def check_output(output: Path) -> None:
    """The average never replaces a run's own checkpoint: best.pt (what evaluate and
    translate read), last.pt (what --resume needs, optimizer and all) or a kept one
    (which a later average may read)."""
    own = output.name in ("best.pt", "last.pt") or KEPT.fullmatch(output.name)
    if own and is_run(output.parent):
        raise NmtError(
            f"-o {output}: the run's own checkpoint; write the average beside it (avg.pt)"
        )


def average(paths: list[Path]) -> dict[str, Any]:
    """The newest (last) checkpoint's payload with every floating-point tensor of its
    model replaced by the mean over ``paths`` (in float64, then cast back); integer
    buffers (counters) keep the newest value. The checkpoints must come from one
    recipe's run: the same tensors, shapes, model settings, vocabulary and seed."""
    if not paths:
        raise NmtError("average: no checkpoints given")
    payloads = [checkpoint.load(p) for p in paths]
    for path, payload in zip(paths, payloads):  # each a whole model: entries, shapes, dtypes
        model_from_payload(payload, path, torch.device("cpu"))
    newest = payloads[-1]
    for path, payload in zip(paths, payloads):
        if payload["config"].get("model") != newest["config"].get("model"):
            raise NmtError(f"{path}: another model's checkpoint than {paths[-1]}; not averaged")
        if payload.get("vocab") != newest.get("vocab"):
            raise NmtError(f"{path}: another vocabulary than {paths[-1]}'s; not averaged")
        seeds = [p["config"].get("train", {}).get("seed") for p in (payload, newest)]
        if seeds[0] != seeds[1]:
            raise NmtError(
                f"{path}: another run than {paths[-1]} (train.seed {seeds[0]}, not {seeds[1]}); "
                "separately trained models do not average into one; not averaged"
            )
        differs = {
            k
            for k, v in payload["model"].items()
            if getattr(newest["model"].get(k), "shape", None) != v.shape
            or newest["model"][k].dtype != v.dtype
        } | (newest["model"].keys() - payload["model"].keys())
        if differs:
            raise NmtError(
                f"{path}: tensors differ from {paths[-1]} ({', '.join(sorted(differs)[:3])})"
            )
    model = {}
    for key, value in newest["model"].items():
        if value.is_floating_point():
            total = sum(p["model"][key].double() for p in payloads)
            model[key] = (total / len(payloads)).to(value.dtype)
        else:
            model[key] = value
    return {
        **{k: v for k, v in newest.items() if k not in NOT_CARRIED},
        "model": model,
        "averaged": [str(p) for p in paths],
    }


def average_last(run_dir: Path, n: int) -> dict[str, Any]:
    """The average of the run's newest ``n`` kept checkpoints."""
    kept = kept_checkpoints(run_dir)
    if len(kept) < n:
        raise NmtError(
            f"{run_dir}: averaging the last {n} checkpoints needs {n}, the run kept "
            f"{len(kept)} (train.keep_checkpoints: at least {n} before training)"
        )
    return average(kept[-n:])


def average_into(inputs: list[Path], last: int | None, output: Path) -> int:
    """``nmt average``: the named checkpoints, or with ``last`` the newest ``last``
    kept checkpoints of one run directory, averaged into ``output``; returns how
    many were averaged."""
    check_output(output)
    if last is not None:
        if len(inputs) != 1 or not inputs[0].is_dir():
            raise NmtError("--last: give one run directory (it reads RUN/step-*.pt)")
        payload = average_last(inputs[0], last)
    else:
        if dirs := [p for p in inputs if p.is_dir()]:
            raise NmtError(
                f"{dirs[0]}: a run directory; add --last N for its newest N kept "
                "checkpoints, or name checkpoint files"
            )
        named: dict[Path, Path] = {}
        for path in inputs:  # a slip on the command line, not a weight
            if (key := path.resolve()) in named:
                raise NmtError(f"{path}: named twice (as {named[key]}); it would count double")
            named[key] = path
        payload = average(inputs)
    checkpoint.save(output, payload)
    return len(payload["averaged"])
