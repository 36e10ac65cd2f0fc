"""The benchmark scripts still run against today's library: each imports, and the
two that drive the trainer's internals take a few steps on the toy corpus."""

from __future__ import annotations

import importlib.util
import json
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


@pytest.mark.slow
def test_time_to_quality_scores_every_snapshot_and_finds_the_thresholds(toy_dir, tmp_path):
    """A few dozen updates on the toy corpus from an empty data cache: a snapshot every
    15, each scored, its training time growing and below the time waited from the
    command's start, itself below the process's wall time; BLEU >= 0 is reached at the
    first snapshot and BLEU >= 101 never."""
    run_dir = tmp_path / "run"
    command = [sys.executable, str(BENCHMARKS / "time_to_quality.py"), "recipes/toy.yaml"]
    command += ["--data", str(toy_dir), "--run-dir", str(run_dir), "--every", "15"]
    command += ["--split", "test", "--thresholds", "0", "101", "--average", "2", *TINY]
    command += ["--cache", "cold"]
    command += ["--set", "train.max_steps=45", "--set", "train.max_epochs=null"]
    env = {**subprocess_env(), "NMT_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=300, cwd=BENCHMARKS.parent
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((run_dir / "time_to_quality-test.json").read_text())
    steps = [s["step"] for s in result["snapshots"]]
    seconds = [s["train_s"] for s in result["snapshots"]]
    assert steps == [15, 30, 45] and seconds == sorted(seconds)
    waited = [s["wall_s"] for s in result["snapshots"]]
    assert waited == sorted(waited) and all(w > t for w, t in zip(waited, seconds))
    assert 0 < seconds[-1] < waited[-1] < result["process_wall_s"]
    assert result["cache"] == "cold" and (tmp_path / "run-cache").is_dir()
    assert [s["averaged_bleu"] is None for s in result["snapshots"]] == [True, False, False]
    assert result["reached"]["0.0"]["step"] == 15 and result["reached"]["101.0"] is None
    assert "BLEU >= 101.0 on test: not reached" in done.stdout

    # scored again on another split, the result still names how the run was trained
    again = [*command[:3], "--data", str(toy_dir), "--run-dir", str(run_dir), "--score-only"]
    done = subprocess.run(
        [*again, "--split", "val"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=BENCHMARKS.parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rescored = json.loads((run_dir / "time_to_quality-val.json").read_text())
    kept = ("commit", "date", "overrides", "cache", "process_wall_s", "launched")
    assert {k: rescored[k] for k in kept} == {k: result[k] for k in kept}
    assert [s["step"] for s in rescored["snapshots"]] == steps and rescored["split"] == "val"
    assert [s["wall_s"] for s in rescored["snapshots"]] == waited

    # with no earlier result to read, the run's own recipe says what it trained with
    for earlier in run_dir.glob("time_to_quality*.json"):
        earlier.unlink()
    done = subprocess.run(
        [*again, "--split", "val"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=BENCHMARKS.parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    overrides = json.loads((run_dir / "time_to_quality-val.json").read_text())["overrides"]
    assert {"model.d_model=32", "train.max_steps=45", "train.max_epochs=null"} <= set(overrides)
    assert not any(o.startswith(("run_dir=", "data.dir=", "train.valid_every=")) for o in overrides)


@pytest.mark.slow
def test_tune_decoding_scores_every_setting_and_names_the_best(tiny_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    out = tmp_path / "tune.json"
    cmd = [sys.executable, str(BENCHMARKS / "tune_decoding.py"), str(run), "--split", "test*2"]
    cmd += ["--remedy", "word_reward", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=subprocess_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "best of each remedy" in proc.stdout
    rows = json.loads(out.read_text())["rows"]
    assert [r["remedy"] for r in rows] == ["recipe"] + ["word_reward"] * 3
    assert all(
        set(r["bleu"]) == {"tmp_path_unused run test*2"} or len(r["bleu"]) == 1 for r in rows
    )
    stored = json.loads((run / "results.json").read_text())
    assert "test*2@decode.alpha=0,decode.word_reward=0.5" in stored
