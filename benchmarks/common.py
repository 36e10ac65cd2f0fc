"""Helpers shared by the benchmark scripts."""

from __future__ import annotations

import time
from pathlib import Path

import torch

SHARED_MULTI30K = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "multi30k"


def matmul_gflops(n: int = 2048, repeats: int = 10) -> float:
    """The machine's measured fp32 matmul rate in GFLOP/s (n x n @ n x n)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * n**3 * repeats / (time.perf_counter() - start) / 1e9
