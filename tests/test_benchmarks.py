"""The benchmark scripts still run against today's library: each imports, and the
two that drive the trainer's internals take a few steps on the toy corpus."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_extra, subprocess_env

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if p.name != "common.py")
TINY = ["--set", "model.d_model=32", "--set", "model.ffn=64", "--set", "model.heads=2"]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_benchmark_imports(script, monkeypatch):
    if script.name == "ctranslate2_speed.py":
        require_extra("ctranslate2", "ctranslate2")
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # as `python benchmarks/x.py` runs it
    spec = importlib.util.spec_from_file_location(script.stem, script)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, script.stem, module)  # dataclasses look it up there
    spec.loader.exec_module(module)
    assert callable(module.main)


@pytest.mark.slow
@pytest.mark.parametrize(
    "script, args, expect",
    [
        (
            "train_throughput.py",
            ["--steps", "2", "--warmup-steps", "1", "--probe-every", "1"],
            "efficiency",
        ),
        ("profile_step.py", ["--steps", "2", "--rows", "3"], "Self CPU time total"),
    ],
)
def test_the_trainer_benchmarks_run_a_few_steps(script, args, expect, toy_dir, tmp_path):
    command = [sys.executable, str(BENCHMARKS / script), "--recipe", "recipes/toy.yaml"]
    command += ["--data", str(toy_dir), *args, *TINY]
    env = {**subprocess_env(), "NMT_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=300, cwd=BENCHMARKS.parent
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert expect in done.stdout
