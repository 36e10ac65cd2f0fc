"""The training-throughput benchmark runs a recipe and samples the machine's matmul
rate in every window of steps."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


ARGS = ["--recipe", "recipes/toy.yaml", "--data", "data/toy", "--warmup-steps", "1"]


def test_efficiency_comes_from_one_probe_per_window():
    out = subprocess.run(
        [
            sys.executable,
            "benchmarks/train_throughput.py",
            *ARGS,
            "--steps",
            "5",
            "--probe-every",
            "2",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert re.search(r"time per step\s+\d+ ms over 5 steps", out), out
    assert re.search(r"page faults\s+\d+ a step", out), out
    assert "after every 2 steps: 3 samples" in out, out  # windows of 2, 2 and 1 steps
    low, high = re.search(r"per window: median [\d.]+%, ([\d.]+)%-([\d.]+)%", out).groups()
    assert 0 < float(low) <= float(high)
