"""A real training process killed with SIGKILL at random moments, and resumed,
ends with exactly the parameters of an uninterrupted run (CPU, same seed)."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from nmt.io import checkpoint
from nmt.setup.recipe import load_recipe
from nmt.training.run import train
from tests.conftest import subprocess_env, write_subprocess_recipe

KILLS = 3
STEPS = 30  # the three kills (at most 8 steps apart; rng seeded below) come before the end


def train_cmd(recipe: Path, resume: bool) -> list[str]:
    return [
        sys.executable,
        "-m",
        "nmt",
        "train",
        str(recipe),
        "--device",
        "cpu",
        *(["--resume"] if resume else []),
    ]


def write_recipe(toy_dir: Path, run: Path) -> Path:
    # Saving every step puts many kills inside a checkpoint write.
    return write_subprocess_recipe(toy_dir, run, max_steps=STEPS, valid_every=1, log_every=1)


def logged_lines(run: Path) -> int:
    path = run / "metrics.jsonl"
    return len(path.read_bytes().splitlines()) if path.is_file() else 0


@pytest.mark.slow
def test_sigkill_and_resume_reach_the_uninterrupted_parameters(toy_dir, tmp_path):
    env = subprocess_env()
    # the uninterrupted run in this process, with the thread count the processes below
    # get: the parameters of a process of its own, without its seconds of imports
    train(load_recipe(str(write_recipe(toy_dir, tmp_path / "straight"))), device="cpu")

    run = tmp_path / "killed"
    recipe = write_recipe(toy_dir, run)
    rng = random.Random(0)
    kills = 0
    while kills < KILLS:
        resume = (run / "last.pt").is_file()
        logged = logged_lines(run)
        proc = subprocess.Popen(
            train_cmd(recipe, resume), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        # Kill a few steps into this run, at a random moment inside a step (every step
        # writes a checkpoint, so some kills land inside a write).
        target, deadline = logged + rng.randint(2, 16), time.time() + 120
        while proc.poll() is None and logged_lines(run) < target and time.time() < deadline:
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.05))
        assert proc.poll() is None, "the run ended before its kill"
        proc.send_signal(signal.SIGKILL)
        kills += 1
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == -signal.SIGKILL, err.decode()
    # the last resume, to the end, here: what it reads is what the kills left
    train(load_recipe(str(recipe)), device="cpu", resume=True)

    a = checkpoint.load(tmp_path / "straight" / "last.pt")
    b = checkpoint.load(run / "last.pt")
    assert a["state"]["step"] == b["state"]["step"] == STEPS
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "loss" in r] == list(range(1, STEPS + 1))  # no torn
    assert [r["step"] for r in records if "valid_loss" in r] == list(range(1, STEPS + 1))
    assert not [p for p in run.iterdir() if p.name.endswith(".tmp")]
