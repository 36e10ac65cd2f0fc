"""Data-parallel training (DDP, gloo on 127.0.0.1) equals one process on the same
global batches."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from nmt import checkpoint
from tests.conftest import subprocess_env, training_until_logged, write_subprocess_recipe

STEPS = 4


def recipe(toy_dir: Path, run: Path, accumulate: int) -> Path:
    return write_subprocess_recipe(
        toy_dir,
        run,
        model={"dropout": 0.0},
        max_steps=STEPS,
        valid_every=STEPS,
        accumulate=accumulate,
    )


@pytest.mark.slow
def test_two_gloo_ranks_match_one_process(toy_dir, tmp_path):
    env = subprocess_env()
    single = recipe(toy_dir, tmp_path / "single", accumulate=2)
    subprocess.run(
        [sys.executable, "-m", "nmt", "train", str(single), "--device", "cpu"],
        check=True,
        env=env,
        capture_output=True,
        timeout=300,
    )
    ddp = recipe(toy_dir, tmp_path / "ddp", accumulate=1)
    done = subprocess.run(
        [sys.executable, "-m", "nmt", "train", str(ddp), "--device", "cpu", "--nproc", "2"],
        env={**env, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    a = checkpoint.load(tmp_path / "single" / "last.pt")
    b = checkpoint.load(tmp_path / "ddp" / "last.pt")
    assert a["state"]["step"] == b["state"]["step"] == STEPS
    assert a["state"]["tokens"] == b["state"]["tokens"]
    assert len(b["rng"]) == 2  # one RNG state per rank
    for name, tensor in a["model"].items():
        other = b["model"][name]
        if name.endswith(("qkv.bias", "k_proj.bias")):
            # Key biases get an analytically zero gradient (a softmax ignores a shift
            # shared by all keys); Adam turns float noise there into steps of about lr.
            keys = (
                slice(tensor.numel() // 3, 2 * tensor.numel() // 3)
                if "qkv" in name
                else slice(None)
            )
            assert (other[keys] - tensor[keys]).abs().max() <= STEPS * 3e-3
            tensor, other = tensor.clone(), other.clone()
            tensor[keys] = other[keys] = 0
        torch.testing.assert_close(other, tensor, atol=1e-5, rtol=1e-4, msg=name)
    # only rank 0 wrote: one training-log record per logged step
    logged = [yaml.safe_load(x)["step"] for x in (tmp_path / "ddp" / "metrics.jsonl").open()]
    assert len(logged) == len(set(logged)) + 1  # training log + validation at the last step


@pytest.mark.slow
def test_sigterm_to_nmt_train_nproc_reaches_every_rank(toy_dir, tmp_path):
    """A scheduler signals the process it started, not torchrun's ranks: the signal
    is passed on, rank 0 saves last.pt, and no rank is left running."""
    run = tmp_path / "ddp"
    env = {**subprocess_env(), "OMP_NUM_THREADS": "1"}
    proc = training_until_logged(toy_dir, run, "--nproc", "2", env=env, start_new_session=True)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err.decode()[-3000:]
    assert checkpoint.load(run / "last.pt")["state"]["step"] >= 1
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)  # nothing of the session is left
