"""Helpers shared by the benchmark scripts."""

from __future__ import annotations

import time
from pathlib import Path

import torch

SHARED_MULTI30K = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "multi30k"


def matmul_gflops(
    n: int = 2048, repeats: int = 10, device: str = "cpu", dtype: torch.dtype = torch.float32
) -> float:
    """The machine's measured matmul rate in GFLOP/s (n x n @ n x n) on ``device``."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    sync = torch.cuda.synchronize if a.is_cuda else (lambda: None)
    a @ b  # warm-up
    sync()
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    sync()
    return 2 * n**3 * repeats / (time.perf_counter() - start) / 1e9
