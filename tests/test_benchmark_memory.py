"""The attention benchmark's CPU memory figure counts what a step holds at once."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "attention_scaling.py"
# loaded when the module is collected, not per test (tests.helpers.script_module): the
# parametrisation below reads its VARIANTS (the script imports no module of benchmarks/)
spec = importlib.util.spec_from_file_location("attention_scaling", SCRIPT)
attention_scaling = importlib.util.module_from_spec(spec)
spec.loader.exec_module(attention_scaling)

MB = 2**20


def test_peak_is_what_is_alive_together_plus_what_was_held():
    held = torch.zeros(MB // 4)  # 1 MB alive before the step

    def step() -> None:
        a = torch.ones(2 * MB // 4)  # 2 MB
        b = torch.ones(3 * MB // 4)  # 3 MB, alive with a: 5 MB at once
        del a, b
        c = torch.ones(4 * MB // 4)  # 4 MB alone
        del c

    peak = attention_scaling.cpu_peak_mb(step, [held])
    assert 6.0 <= peak < 6.1


@pytest.mark.parametrize("variant", list(attention_scaling.VARIANTS))
def test_every_variant_runs_through_the_benchmark(variant):
    """Each variant's step, hard attention's REINFORCE loss included, at a small size."""
    result = attention_scaling.one(variant, 48, "cpu", repeats=2, d_model=32, heads=2)
    held = 4 * 48 * 32 * 4 / MB  # the two inputs and their gradients at least
    assert result["peak_mb"] > held and result["ms"] > 0
