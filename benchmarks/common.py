"""Helpers shared by the benchmark scripts."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch

from nmt.config import load_recipe
from nmt.training import TRAINERS
from nmt.training.trainer import Trainer

SHARED_MULTI30K = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "multi30k"


def matmul_gflops(
    n: int = 2048, repeats: int = 10, device: str = "cpu", dtype: torch.dtype = torch.float32
) -> float:
    """The machine's matmul rate in GFLOP/s (n x n @ n x n) on ``device``: the median of
    ``repeats`` timings into a preallocated output, so neither page faults on a fresh
    output nor one slow repeat move it (on 2 CPU cores: 207 GFLOP/s, where timing
    ``a @ b`` gave anything from 168 to 228)."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    sync = torch.cuda.synchronize if a.is_cuda else (lambda: None)
    torch.mm(a, b, out=out)  # warm-up
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        torch.mm(a, b, out=out)
        sync()
        times.append(time.perf_counter() - start)
    return 2 * n**3 / statistics.median(times) / 1e9


def recipe_trainer(
    recipe: str, data: str, run_dir: str, device: str, overrides: list[str]
) -> Trainer:
    """The recipe's trainer, set up in ``run_dir`` on ``data``, with no step budget."""
    cfg = load_recipe(
        recipe, [f"data.dir={data}", f"run_dir={run_dir}", "train.max_steps=1000000", *overrides]
    )
    trainer = TRAINERS.get(cfg.train.trainer)(cfg, device=device)
    trainer.setup()
    return trainer
