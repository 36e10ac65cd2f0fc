"""Where stderr is no terminal (a SLURM log, nohup, CI, ``2> log``), long work prints
plain lines with its progress, rate and ETA; a run records where it ran, and a
study's report says when its runs and timings mix machines or loads."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nmt.compare.aggregate import machine_notes
from nmt.compare.analysis import RunAnalysis
from tests.conftest import subprocess_env, write_subprocess_recipe


@pytest.mark.slow
def test_train_and_evaluate_print_plain_lines_into_a_log(toy_dir, tmp_path):
    recipe = write_subprocess_recipe(toy_dir, tmp_path / "run", max_steps=6, valid_every=3)
    recipe.write_text(recipe.read_text().replace("test: []", "test: [test]"))
    log = tmp_path / "train.log"
    with open(log, "w") as stderr:
        done = subprocess.run(
            [sys.executable, "-m", "nmt", "train", str(recipe), "--device", "cpu"],
            # a cache of its own: the corpus is encoded here, whatever ran before
            env={**subprocess_env(), "COLUMNS": "100", "NMT_CACHE_DIR": str(tmp_path / "cache")},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            timeout=300,
        )
    text = log.read_text()
    assert done.returncode == 0, text[-2000:]
    steps = re.findall(
        r"^step (\d+)/6 .* tok/s  lr \S+  elapsed \d:\d\d:\d\d  ETA \S+$", text, re.M
    )
    assert steps and steps == sorted(steps, key=int), text[-2000:]
    # the data cache's encoding: a line when it ends (and every minute), not a bar
    assert re.search(r"^encoding train\.src: [\d,]+ pairs in \d:\d\d:\d\d \(", text, re.M)
    assert "━" not in text  # no bar (training's, the encoding's) drawn into the log
    assert re.search(r"^test: 15 sentences$", text, re.M)
    assert re.search(r"^test: 15 sentences in \d:\d\d:\d\d \([\d.,]+ sent/s\)$", text, re.M)
    where = json.loads((tmp_path / "run" / "summary.json").read_text())["where"]
    assert {"host", "cpu", "cores", "threads", "torch", "device", "load", "load_at_start"} <= set(
        where
    )
    assert where["device"] == "cpu" and where["cores"] >= 1


def run_on(cpu: str, load: float, run_dir: str = ".") -> RunAnalysis:
    where = {"cpu": cpu, "cores": 2, "device": "cpu", "load_at_start": load}
    return RunAnalysis("v", 1, Path(run_dir), 0, {"where": where}, [], {})


def test_the_report_says_when_timings_mix_machines_or_loads():
    assert machine_notes({"a": [run_on("X", 0.1)], "b": [run_on("X", 0.4)]}) == []
    mixed = machine_notes({"a": [run_on("X", 0.1)], "b": [run_on("Y", 1.6)]})
    assert len(mixed) == 2
    assert "mix machines: X x2 (cpu); Y x2 (cpu)" in mixed[0]
    assert "load average of 0.1 to 1.6" in mixed[1]
    older = RunAnalysis("v", 1, Path("."), 0, {}, [], {})  # a run from before it was kept
    assert machine_notes({"a": [older, run_on("X", 0.2)]}) == []


def test_the_report_says_when_runs_were_trained_with_other_library_versions():
    """One machine, one load, but SentencePiece at two versions: the report says which
    library, which versions, and which variant trained with which (a reused run from
    another venv is told apart); runs that agree, or kept no versions, say nothing."""

    def run_with(versions: dict | None, run_dir: str) -> RunAnalysis:
        run = run_on("X", 0.1, run_dir)
        if versions is not None:
            run.train["where"]["libraries"] = versions
        return run

    same = {"sentencepiece": "0.2.3", "numpy": "2.4.6"}
    older = {"sentencepiece": "0.2.0", "numpy": "2.4.6"}
    assert machine_notes({"a": [run_with(same, "a")], "b": [run_with(same, "b")]}) == []
    assert machine_notes({"a": [run_with(same, "a")], "b": [run_with(None, "b")]}) == []
    damaged = run_with(same, "b")
    damaged.train["where"]["libraries"] = ["sentencepiece"]  # a summary.json edited by hand
    assert machine_notes({"a": [run_with(same, "a")], "b": [damaged]}) == []
    (note,) = machine_notes({"a": [run_with(same, "a")], "b": [run_with(older, "b")]})
    assert "other library versions (sentencepiece 0.2.0 and 0.2.3)" in note
    assert "numpy" not in note
    a = [run_with(same, "a/seed1"), run_with(older, "a/seed2")]
    runs = {"a": a, "b": [run_with(same, "b/seed1")], "c": [run_with(None, "c")], "a@split": a}
    (note,) = machine_notes(runs)
    assert (
        "(a with sentencepiece 0.2.0 and sentencepiece 0.2.3; b with sentencepiece 0.2.3)" in note
    )
    assert "c with" not in note and "a@split" not in note
    two = {"sentencepiece": "0.2.0", "numpy": "2.3.5"}
    (note,) = machine_notes({"a": [run_with(same, "a")], "b": [run_with(two, "b")]})
    assert "(sentencepiece 0.2.0 and 0.2.3; numpy 2.3.5 and 2.4.6)" in note
    assert (
        "(a with sentencepiece 0.2.3, numpy 2.4.6; b with sentencepiece 0.2.0, numpy 2.3.5)" in note
    )


def test_the_report_says_when_runs_used_kernels_for_other_instruction_sets():
    """One CPU model, but ATen's kernels for AVX2 in one run and the default code in
    another (ATEN_CPU_CAPABILITY): on one machine that alone trains other losses, so
    the report says so, variant by variant; runs from before it was kept say nothing."""

    def run_with(kernels: str | None, run_dir: str) -> RunAnalysis:
        run = run_on("X", 0.1, run_dir)
        if kernels is not None:
            run.train["where"]["kernels"] = kernels
        return run

    assert machine_notes({"a": [run_with("AVX2", "a")], "b": [run_with("AVX2", "b")]}) == []
    assert machine_notes({"a": [run_with("AVX2", "a")], "b": [run_with(None, "b")]}) == []
    runs = {
        "a": [run_with("AVX2", "a/1"), run_with("DEFAULT", "a/2")],
        "b": [run_with("AVX2", "b")],
    }
    (note,) = machine_notes(runs)
    assert "more than one instruction set (AVX2 and DEFAULT; ATen picks" in note
    assert "(a with AVX2 and DEFAULT; b with AVX2)" in note


def test_the_report_says_when_runs_on_the_cpu_used_other_thread_counts():
    """A study resumed with one run left gives it the threads of two (``--jobs``):
    another thread count alone trains other losses, so the report says so; runs on a
    GPU, or from before threads were kept, say nothing."""

    def run_with(threads: int | None, run_dir: str, device: str = "cpu") -> RunAnalysis:
        run = run_on("X", 0.1, run_dir)
        run.train["where"].update(device=device, threads=threads)
        return run

    assert machine_notes({"a": [run_with(1, "a")], "b": [run_with(1, "b")]}) == []
    assert machine_notes({"a": [run_with(1, "a")], "b": [run_with(None, "b")]}) == []
    gpu = {"a": [run_with(1, "a", "cuda:0")], "b": [run_with(2, "b", "cuda:0")]}
    assert [n for n in machine_notes(gpu) if "thread" in n] == []
    (note,) = machine_notes({"a": [run_with(1, "a")], "b": [run_with(2, "b")]})
    assert "more than one thread count (1 thread and 2 threads; nmt compare gives" in note
    assert "(a with 1 thread; b with 2 threads)" in note


def test_the_report_says_which_variant_trained_where_when_machines_differ():
    """One seed can train to other weights on another machine: scores compared across
    machines mix it in, so the report names each variant's machines."""
    assert machine_notes({"a": [run_on("X", 0.1)], "b": [run_on("X", 0.4)]}) == []
    older = RunAnalysis("v", 1, Path("."), 0, {}, [], {})
    assert machine_notes({"a": [older], "b": [run_on("X", 0.4)]}) == []
    a = [run_on("X", 0.1, "a/seed1"), run_on("Y", 0.1, "a/seed2")]
    runs = {"a": a, "b": [run_on("Y", 0.2, "b/seed1")], "c": [older], "a@split": a}
    (note,) = machine_notes(runs)
    assert "(a on X x2 (cpu) and Y x2 (cpu); b on Y x2 (cpu))" in note
    assert "c on" not in note and "a@split" not in note and "mixes in the machine" in note


@pytest.mark.slow
def test_a_study_in_a_log_says_when_each_run_starts_and_ends(toy_dir, tmp_path):
    from tests.compare.test_compare import write_spec

    spec = write_spec(tmp_path, toy_dir, {"global": []}, seeds=(1, 2, 3))
    log = tmp_path / "compare.log"
    with open(log, "w") as stderr:
        done = subprocess.run(
            [sys.executable, "-m", "nmt", "compare", str(spec), "--device", "cpu", "--jobs", "2"],
            env={**subprocess_env(), "OMP_NUM_THREADS": "1"},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            timeout=300,
        )
    text = log.read_text()
    assert done.returncode == 0, text[-2000:]
    for seed in (1, 2, 3):
        assert f"global seed {seed}: started" in text and f"global seed {seed}: trained" in text
    # two workers: the third run starts when one of the first two has ended, not when it
    # is queued for them (a study's log once said three runs were running)
    assert text.index("global seed 3: started") > text.index(": trained")
    # the report's analysis, minutes on a real study: where it stands, with an ETA
    analysing = [line for line in text.splitlines() if line.startswith("analysing global")]
    counts = [line.split("(")[1].split(",")[0] for line in analysing]
    assert counts == ["1 of 3", "2 of 3", "3 of 3"]
    assert "ETA ?" in analysing[0] and "ETA ?" not in analysing[1]
    assert "analysed 3 runs in " in text and text.index("analysed 3 runs") < text.index("report: ")
    assert "━" not in text  # no bar (the study's, the analysis') drawn into the log
