"""The benchmark scripts still run against today's library: each imports, and the
two that drive the trainer's internals take a few steps on the toy corpus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from tests.conftest import require_extra, subprocess_env
from tests.helpers import script_module

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if p.name != "common.py")
TINY = ["--set", "model.d_model=32", "--set", "model.ffn=64", "--set", "model.heads=2"]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_benchmark_imports(script, monkeypatch):
    if script.name == "serving_speed.py":
        require_extra("onnxruntime", "onnx")
    if script.name == "hf_roundtrip.py":
        require_extra("transformers", "hf")
    assert callable(script_module(script, monkeypatch).main)


@pytest.mark.slow
def test_train_throughput_runs_a_few_steps_under_the_shells_allocator(toy_dir, tmp_path):
    """A process of its own: the benchmark reports the allocator of the shell that
    started it (here one that preloads nothing), not the one nmt chooses."""
    command = [sys.executable, str(BENCHMARKS / "train_throughput.py"), "--recipe"]
    command += ["recipes/toy.yaml", "--data", str(toy_dir), "--steps", "2"]
    command += ["--warmup-steps", "1", "--probe-every", "1", *TINY]
    env = {**subprocess_env(), "NMT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("LD_PRELOAD", None)  # a shell that preloads nothing, whatever pytest inherited
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=300, cwd=BENCHMARKS.parent
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "efficiency" in done.stdout and "system malloc)" in done.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "script, args, expect",
    [
        ("profile_step.py", ["--steps", "2", "--rows", "3"], "copies of parameter shape:"),
        (
            "vs_reference.py",
            [
                *("--steps", "2", "--warmup-steps", "1", "--rows", "3"),
                *("--profile-steps", "1", "--trace", "{tmp}/t.json"),
            ],
            "nmt / reference",
        ),
    ],
)
def test_the_step_benchmarks_run_a_few_steps(
    script, args, expect, toy_dir, tmp_path, monkeypatch, capsys
):
    """The script's ``main``, run here as its last line calls it."""
    module = script_module(BENCHMARKS / script, monkeypatch)
    monkeypatch.chdir(BENCHMARKS.parent)
    argv = [script, "--recipe", "recipes/toy.yaml", "--data", str(toy_dir)]
    monkeypatch.setattr(sys, "argv", [*argv, *(a.format(tmp=tmp_path) for a in args), *TINY])
    module.main()
    out = capsys.readouterr().out
    assert expect in out
    if "--trace" in args:  # the profiled steps as a Chrome trace, and each first step
        events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
        assert any(e.get("name") == "aten::mm" for e in events)
        assert "first step (compiling included with --compile): nmt" in out


@pytest.mark.slow
def test_time_to_quality_scores_every_snapshot_and_finds_the_thresholds(
    toy_dir, tmp_path, monkeypatch
):
    """Thirty updates on the toy corpus from an empty data cache: a snapshot every 15,
    each scored, its training time growing and below the time waited from the
    command's start, itself below the process's wall time; BLEU >= 0 is reached at the
    first snapshot and BLEU >= 101 never."""
    run_dir = tmp_path / "run"
    command = [sys.executable, str(BENCHMARKS / "time_to_quality.py"), "recipes/toy.yaml"]
    command += ["--data", str(toy_dir), "--run-dir", str(run_dir), "--every", "15"]
    command += ["--split", "test", "--thresholds", "0", "101", "--average", "2", *TINY]
    command += ["--cache", "cold"]
    command += ["--set", "train.max_steps=30", "--set", "train.max_epochs=null"]
    env = {**subprocess_env(), "NMT_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=300, cwd=BENCHMARKS.parent
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((run_dir / "time_to_quality-test.json").read_text())
    steps = [s["step"] for s in result["snapshots"]]
    seconds = [s["train_s"] for s in result["snapshots"]]
    assert steps == [15, 30] and seconds == sorted(seconds)
    waited = [s["wall_s"] for s in result["snapshots"]]
    assert waited == sorted(waited) and all(w > t for w, t in zip(waited, seconds))
    assert 0 < seconds[-1] < waited[-1] < result["process_wall_s"]
    assert result["cache"] == "cold" and (tmp_path / "run-cache").is_dir()
    assert [s["averaged_bleu"] is None for s in result["snapshots"]] == [True, False]
    assert result["reached"]["0.0"]["step"] == 15 and result["reached"]["101.0"] is None
    assert "BLEU >= 101.0 on test: not reached" in done.stdout

    # scored again on another split (its main, here), the result still names how the
    # run was trained
    script = script_module(BENCHMARKS / "time_to_quality.py", monkeypatch)
    monkeypatch.chdir(BENCHMARKS.parent)
    monkeypatch.setenv("NMT_CACHE_DIR", env["NMT_CACHE_DIR"])
    again = [*command[1:3], "--data", str(toy_dir), "--run-dir", str(run_dir), "--score-only"]
    monkeypatch.setattr(sys, "argv", [*again, "--split", "val"])
    script.main()
    rescored = json.loads((run_dir / "time_to_quality-val.json").read_text())
    kept = ("commit", "date", "overrides", "cache", "process_wall_s", "launched")
    assert {k: rescored[k] for k in kept} == {k: result[k] for k in kept}
    assert [s["step"] for s in rescored["snapshots"]] == steps and rescored["split"] == "val"
    assert [s["wall_s"] for s in rescored["snapshots"]] == waited
    assert rescored["every"] == result["every"] == 15  # the run's, not the rescoring's default

    # with no earlier result to read, the run's own recipe says what it trained with
    for earlier in run_dir.glob("time_to_quality*.json"):
        earlier.unlink()
    script.main()
    overrides = json.loads((run_dir / "time_to_quality-val.json").read_text())["overrides"]
    assert {"model.d_model=32", "train.max_steps=30", "train.max_epochs=null"} <= set(overrides)
    assert not any(o.startswith(("run_dir=", "data.dir=", "train.valid_every=")) for o in overrides)


@pytest.mark.slow
def test_tune_decoding_scores_every_setting_and_names_the_best(
    tiny_run, tmp_path, monkeypatch, capsys
):
    """The script's ``main``, run here as its last line calls it (a benchmark run as
    a command, signals included: time_to_quality's tests)."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    out = tmp_path / "tune.json"
    script = script_module(BENCHMARKS / "tune_decoding.py", monkeypatch)
    argv = ["tune_decoding.py", str(run), "--split", "test*2", "--remedy", "word_reward"]
    monkeypatch.setattr(sys, "argv", [*argv, "--json", str(out)])
    script.main()
    assert "chosen for each remedy" in capsys.readouterr().out
    payload = json.loads(out.read_text())
    rows = payload["rows"]
    assert [r["remedy"] for r in rows] == ["recipe"] + ["word_reward"] * 3
    assert all(set(r["bleu"]) == {f"{tmp_path.name}/run test*2"} for r in rows)
    assert set(payload["chosen"]) == {"recipe", "word_reward"}
    stored = json.loads((run / "results.json").read_text())
    assert "test*2@decode.alpha=0,decode.word_reward=0.5" in stored


def test_tune_decoding_never_chooses_a_setting_that_loses_the_first_split(monkeypatch):
    """The rule: a setting more than ``keep`` BLEU below the recipe on the first
    split, on any run, is not chosen however well it does on the joined splits;
    among the rest the best mean over the joined splits wins."""
    tune = script_module(BENCHMARKS / "tune_decoding.py", monkeypatch)

    def row(remedy, name, a1, a5, b1, b5):
        bleu = {"a val": a1, "a val*5": a5, "b val": b1, "b val*5": b5}
        return {"remedy": remedy, "set": [name], "bleu": bleu}

    table = [
        row("recipe", "", 35.0, 3.0, 35.0, 3.0),
        row("coverage", "loses b", 35.0, 20.0, 34.0, 20.0),  # 1.0 below on run b
        row("coverage", "keeps", 34.6, 8.0, 35.2, 6.0),
        row("coverage", "keeps, worse", 35.0, 5.0, 35.0, 5.0),
        row("min_len", "loses a", 33.0, 9.0, 35.0, 9.0),
    ]
    chosen = tune.choose(table, ["val", "val*5"], keep=0.5)
    assert chosen["coverage"]["set"] == ["keeps"] and chosen["coverage"]["long_bleu"] == 7.0
    assert chosen["min_len"] is None and chosen["recipe"]["set"] == [""]
    assert tune.choose(table, ["val", "val*5"], keep=2.0)["coverage"]["set"] == ["loses b"]


def test_time_to_quality_refuses_in_one_line(toy_dir, tmp_path, monkeypatch, capsys):
    """The benchmark is a command users run: bad arguments and damaged runs are one
    line and exit 2, and no result file is written. Its ``main`` runs here, as the
    script's last line calls it (the tests below run the script itself)."""
    script = script_module(BENCHMARKS / "time_to_quality.py", monkeypatch)
    monkeypatch.chdir(BENCHMARKS.parent)
    data = ("--data", str(toy_dir), "--split", "test")
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [
        (["--every", "0"], "--every 0: updates between snapshots"),
        (["--run-dir", str(empty), "--score-only"], "holds no run of this benchmark"),
        (["--split", "nope", "--run-dir", str(empty), "--score-only"], "nope.src: no such file"),
    ]
    for args, message in cases:
        monkeypatch.setattr(sys, "argv", ["time_to_quality.py", "recipes/toy.yaml", *data, *args])
        with pytest.raises(SystemExit) as stopped:
            script.main()
        err = capsys.readouterr().err
        assert stopped.value.code == 2 and "Traceback" not in err, err[-2000:]
        assert message in err.strip().splitlines()[-1]
    assert not list(empty.iterdir())


@pytest.mark.slow
def test_sigterm_to_time_to_quality_stops_its_training(toy_dir, tmp_path):
    """SIGTERM to the benchmark reaches its nmt train (which saves last.pt); kill -9 of
    the benchmark stops it too (it watches its parent)."""
    import signal as signals
    import time

    for how in ("term", "kill"):
        run = tmp_path / how
        command = [sys.executable, str(BENCHMARKS / "time_to_quality.py"), "recipes/toy.yaml"]
        command += ["--data", str(toy_dir), "--run-dir", str(run), "--every", "100000", *TINY]
        command += ["--split", "test", "--cache", "cold"]  # no nmt data prepare before it
        command += ["--set", "train.max_steps=1000000", "--set", "train.max_epochs=null"]
        command += ["--set", "train.max_minutes=null", "--set", "train.log_every=1"]
        env = {**subprocess_env(), "NMT_CACHE_DIR": str(tmp_path / "cache")}
        proc = subprocess.Popen(
            command,
            env=env,
            cwd=BENCHMARKS.parent,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = time.time() + 120
        while not (run / "metrics.jsonl").is_file() and time.time() < deadline:
            time.sleep(0.2)
        proc.send_signal(signals.SIGTERM if how == "term" else signals.SIGKILL)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == (143 if how == "term" else -9), err.decode()[-2000:]
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                os.killpg(proc.pid, 0)  # the benchmark's session: is anything left?
            except ProcessLookupError:
                break
            time.sleep(0.2)
        else:
            raise AssertionError(f"{how}: nmt train is still running")
        assert (run / "last.pt").is_file()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_step_split_counts_every_operator_once(dtype, monkeypatch):
    """profile_step's four parts hold every CPU operator's self time exactly once:
    the optimiser's work whatever it calls, weight casts only under bf16 autocast."""
    profile_step = script_module(BENCHMARKS / "profile_step.py", monkeypatch)
    where_the_time_goes = profile_step.where_the_time_goes

    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    optimiser = torch.optim.Adam(model.parameters())
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            loss = model(torch.randn(32, 8)).float().square().mean()
        loss.backward()
        optimiser.step()
    events = [e for e in prof.events() if e.device_type.name == "CPU"]
    shapes = {tuple(p.shape) for p in model.parameters()}
    parts = where_the_time_goes(prof.events(), shapes)
    assert sum(calls for calls, _ in parts.values()) == len(events)
    assert sum(us for _, us in parts.values()) == pytest.approx(
        sum(e.self_cpu_time_total for e in events)
    )
    assert parts["optimiser step"][0] > 0 and parts["matrix products"][0] >= 2
    assert (parts["copies of parameter shape"][0] > 0) == (dtype == torch.bfloat16)
