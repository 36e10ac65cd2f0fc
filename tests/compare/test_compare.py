"""``nmt compare`` end to end through the CLI: every output, reuse, failures, --runs."""

from __future__ import annotations

import csv
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.compare.analysis import recipe_of
from nmt.compare.report import Report, write_markdown
from nmt.data.pipeline import load_split
from nmt.data.splits import documents
from nmt.decoding.metrics import corpus_score
from nmt.errors import NmtError
from nmt.io.rundir import owned
from nmt.launch.runs import RunResult, check_reusable
from nmt.setup.compare import SignificanceSpec, load_spec
from nmt.setup.recipe import load_recipe
from tests.conftest import tiny_recipe_dict
from tests.data.test_documents import with_documents

runner = CliRunner()

OUTPUTS = {
    "report.md",
    "results.csv",
    "results.json",
    "spec.yaml",
    "dev_curves.png",
    "bleu_by_length_test.png",
    "attention_test_line0.png",
    "attention_test_line1.png",
}


def write_spec(tmp_path, toy_dir, variants, seeds=(1, 2), extra_set=(), heatmaps=(), figures=False):
    """A spec of tiny runs on the toy corpus; ``extra_set``: more of its ``set``;
    ``heatmaps``: the lines drawn, ``figures``: whether the PNGs are (neither unless a
    test is about them: drawing is most of a tiny study's report time)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    base = tiny_recipe_dict(toy_dir, tmp_path / "unused", train={"max_steps": 4})
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base))
    spec = {
        "base": str(tmp_path / "base.yaml"),
        "out_dir": str(tmp_path / "study"),
        "seeds": list(seeds),
        "set": ["train.valid_every=2", "decode.beam=2", *extra_set],
        "variants": variants,
        "baseline": "global",
        "bootstrap": 200,
        "length_buckets": [8, 16],
        "heatmaps": list(heatmaps),
        "figures": figures,
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.slow
def test_two_variants_two_seeds_every_output(tmp_path, toy_dir):
    spec = write_spec(
        tmp_path,
        toy_dir,
        {
            "global": [],
            "local_m": ["model.attention.kind=local_m", "model.attention.window=2"],
        },
        heatmaps=(0, 1),
        figures=True,
    )
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu", "--set", "ensemble=true"])
    assert result.exit_code == 0, result.output
    # one run at a time: after each, where the study stands, with an ETA
    standing = re.findall(r"study: (\d)/4 runs done, elapsed [\d:]+, ETA ([\d:]+)", result.output)
    assert [k for k, _ in standing] == ["1", "2", "3", "4"] and standing[-1][1] == "0:00:00"
    out = tmp_path / "study"
    assert {p.name for p in out.iterdir()} >= OUTPUTS
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = json.loads((out / "results.json").read_text())
    rows = {r["variant"]: r for r in results["rows"]}
    assert set(rows) == {"global", "local_m"} and not results["failed"]
    assert rows["global"]["p_value"] is None and 0 < rows["local_m"]["p_value"] <= 1
    assert rows["local_m"]["p_holm"] == rows["local_m"]["p_value"]  # a family of one test
    assert rows["global"]["is_baseline"] and not rows["local_m"]["is_baseline"]
    for row in rows.values():
        assert row["seeds"] == 2
        assert row["bleu_ci_low"] <= row["bleu"] <= row["bleu_ci_high"]
        assert 0.0 <= row["aer"] <= 1.0  # the toy corpus has gold alignments
        assert row["entropy"] >= 0 and row["peak_distance"] >= 0
        assert list(row["length_buckets"]) == ["1-8", "9-16", "17+"]
        assert sum(b["sentences"] for b in row["length_buckets"].values()) == 15
    assert rows["global"]["center_spread"] is None
    ensembles = {e["variant"]: e for e in results["ensembles"]}
    for name, e in ensembles.items():  # both seeds as one ensemble, beside their mean
        assert e["seeds"] == 2 and e["seeds_bleu"] == pytest.approx(rows[name]["bleu"])
        assert len((out / "ensembles" / name / "test.hyp").read_text().splitlines()) == 15
    assert set(ensembles) == {"global", "local_m"}
    assert "seeds as one ensemble" in (out / "report.md").read_text()
    assert rows["local_m"]["center_spread"] is not None
    assert len(results["runs"]) == 4
    with (out / "results.csv").open() as f:
        assert [r["variant"] for r in csv.DictReader(f)] == ["global", "local_m"]
    report = (out / "report.md").read_text()
    assert "| local_m |" in report and "![" in report and "BLEU: `nrefs:1" in report

    assert "local_m: " in report and " against global" in report  # the verdict in words
    assert rows["local_m"]["verdict"].startswith("local_m: ")
    assert len(rows["local_m"]["seed_deltas"]) == 2

    # A second invocation reuses every finished run instead of training again; another
    # significance test, or a contrast between any two variants, needs no new run either;
    # a report without figures leaves none of the earlier ones beside it.
    stamp = (out / "runs/global/seed1/best.pt").stat().st_mtime_ns
    sets = ["--set", "significance.test=paired_ar", "--set", "significance.metrics=[chrf,ter]"]
    sets += ["--set", "figures=false"]
    sets += ["--set", "contrasts=[[global, local_m]]", "--set", "scores=[chrf++, ter]"]
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu", *sets])
    assert result.exit_code == 0, result.output
    assert "reused" in result.output
    assert (out / "runs/global/seed1/best.pt").stat().st_mtime_ns == stamp
    results = json.loads((out / "results.json").read_text())
    local_m = results["rows"][1]
    _, refs = load_split(recipe_of(out / "runs/local_m/seed1").data, "test")
    for metric in ("chrf++", "ter"):  # sacreBLEU's corpus score of each seed, averaged
        seeds = [
            corpus_score(metric, (out / f"runs/local_m/seed{s}/test.hyp").read_text().splitlines(),
                         [refs]).score
            for s in (1, 2)
        ]  # fmt: skip
        assert local_m[metric] == pytest.approx(sum(seeds) / 2)
        assert local_m[f"{metric}_std"] == pytest.approx(abs(seeds[0] - seeds[1]) / 2**0.5)
        assert f"{metric}_signature" in local_m
    assert "| chrF++ | TER |" in (out / "report.md").read_text()
    assert "![" not in (out / "report.md").read_text() and not list(out.glob("*.png"))
    assert set(local_m["p_values"]) == {"chrf", "ter"}
    assert local_m["p_value"] == local_m["p_values"]["chrf"]
    (contrast,) = results["contrasts"]  # global against local_m: local_m's test turned round
    assert (contrast["variant"], contrast["reference"]) == ("global", "local_m")
    assert contrast["seed_deltas"] == pytest.approx([-d for d in local_m["seed_deltas"]])
    assert set(contrast["p_values"]) == {"chrf", "ter"}
    assert contrast["p_holm"] == contrast["p_value"]  # a family of one
    assert "| global | local_m |" in (out / "report.md").read_text()

    # A spec that now asks for something else does not silently reuse (or clobber) runs.
    changed = yaml.safe_load(spec.read_text())
    changed["set"].append("train.lr=0.001")
    spec.write_text(yaml.safe_dump(changed))
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert result.exit_code == 2 and "different recipe" in result.output

    # Existing runs compared directly.
    runs = [out / "runs/global/seed1", out / "runs/local_m/seed1"]
    result = runner.invoke(
        app, ["compare", "--runs", str(runs[0]), "--runs", str(runs[1]), "--out",
              str(tmp_path / "direct"), "--device", "cpu"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    direct = json.loads((tmp_path / "direct/results.json").read_text())
    assert [r["variant"] for r in direct["rows"]] == ["global-seed1", "local_m-seed1"]


@pytest.mark.slow
def test_a_failing_variant_does_not_stop_the_study(tmp_path, toy_dir):
    """The others are trained and reported; the exit code says that a run failed. The
    broken variant's training file has a bad byte, which only its run reads."""
    damaged = tmp_path / "damaged"
    shutil.copytree(toy_dir, damaged)
    lines = (toy_dir / "train.src").read_bytes().split(b"\n")
    (damaged / "train.src").write_bytes(b"\n".join([b"caf\xe9", *lines[1:]]))
    spec = write_spec(
        tmp_path, toy_dir, {"global": [], "broken": [f"data.dir={damaged}"]}, seeds=(1,)
    )
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert result.exit_code == 2, result.output
    assert "error: 1 of 2 runs failed (broken seed 1: " in result.output
    results = json.loads((tmp_path / "study/results.json").read_text())
    assert [r["variant"] for r in results["rows"]] == ["global"]
    (failure,) = results["failed"]
    assert failure["variant"] == "broken" and "train.src:1: not UTF-8" in failure["error"]
    assert "failed: " in (tmp_path / "study/report.md").read_text()
    broken = tmp_path / "study/runs/broken/seed1"
    assert "not UTF-8" in (broken / "error.log").read_text()
    shutil.copy(toy_dir / "train.src", damaged / "train.src")  # mended: the run now trains
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert not (broken / "error.log").exists()  # no stale traceback beside a finished run


def test_spec_and_runs_errors_name_the_key(tmp_path, toy_dir, tiny_run):
    spec = write_spec(tmp_path, toy_dir, {"global": [], "x": ["model.atention.kind=hard"]})
    result = runner.invoke(app, ["compare", str(spec)])
    assert result.exit_code == 2
    assert "variant 'x'" in result.output and "model.atention" in result.output
    data = yaml.safe_load(spec.read_text())
    data["baseline"] = "nope"
    spec.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["compare", str(spec)])
    assert result.exit_code == 2 and "baseline" in result.output
    data["baseline"] = "global"
    for pairs, words in (
        ([["x", "nope"]], "contrasts[0]: 'nope' is not a variant"),
        ([["x"]], "contrasts[0]: give two variants"),
        ([["x", "x"]], "contrasts[0]: a variant against itself"),
        ([["x", "global"], ["x", "global"]], "contrasts: a pair named twice"),
    ):
        spec.write_text(yaml.safe_dump({**data, "contrasts": pairs}))
        result = runner.invoke(app, ["compare", str(spec)])
        assert result.exit_code == 2 and words in result.output, result.output
    for scores, words in ((["bleurt"], "unknown bleurt; valid: chrf++, ter"),
                          (["ter", "ter"], "a score named twice")):  # fmt: skip
        spec.write_text(yaml.safe_dump({**data, "scores": scores}))
        result = runner.invoke(app, ["compare", str(spec)])
        assert result.exit_code == 2 and words in result.output, result.output
    result = runner.invoke(app, ["compare"])
    assert result.exit_code == 2 and "--runs" in result.output
    run = tmp_path / "study" / "global"
    (run / "seed1").mkdir(parents=True)
    shutil.copy(tiny_run / "best.pt", run / "seed1" / "best.pt")
    for args, words in (
        (["--runs", run], "--runs " + str(run) + ": no best.pt; it holds the runs seed1"),
        (["--runs", tiny_run, "--runs", tiny_run / ".." / tiny_run.name], "named twice"),
    ):
        result = runner.invoke(app, ["compare", *map(str, args), "--out", str(tmp_path / "o")])
        assert result.exit_code == 2 and words in result.output, result.output
        assert not (tmp_path / "o").exists()


def test_runs_with_a_split_their_corpus_lacks_are_refused_before_evaluating(tmp_path, tiny_run):
    b = tmp_path / "b"
    shutil.copytree(tiny_run, b)
    args = ["--runs", tiny_run, "--runs", b, "--split", "nope", "--out", tmp_path / "o"]
    result = runner.invoke(app, ["compare", *map(str, args)])
    assert result.exit_code == 2 and "--split nope: " in result.output, result.output
    assert "nope.src: no such file" in result.output and not (tmp_path / "o").exists()


def test_a_report_is_never_written_into_a_run(tmp_path, toy_dir, tiny_run):
    """Its results.json would replace the run's scores."""
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(tiny_run, a)
    shutil.copytree(tiny_run, b)
    scores = b'{"test": {"bleu": 1.0}}\n'
    (a / "results.json").write_bytes(scores)
    result = runner.invoke(app, ["compare", "--runs", str(a), "--runs", str(b), "--out", str(a)])
    assert result.exit_code == 2 and f"--out {a}: a run directory" in result.output
    spec = write_spec(tmp_path, toy_dir, {"global": []})
    spec.write_text(yaml.safe_dump({**yaml.safe_load(spec.read_text()), "out_dir": str(a)}))
    result = runner.invoke(app, ["compare", str(spec)])
    assert result.exit_code == 2 and f"out_dir {a}: a run directory" in result.output
    assert (a / "results.json").read_bytes() == scores and not (a / "report.md").exists()


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("seeds", [2**64], "seeds[0]: must be in 0..2,147,483,647"),
        ("bootstrap", 10**12, "bootstrap: use 100..100,000 resamples"),
        ("significance", {"test": "paired_bs", "samples": 10**7}, "significance.samples"),
        ("splits", ["test", "nope"], "splits: "),
        ("heatmaps", [0, 15], "heatmaps: line 15 is past the end of test (15 lines"),
        ("seeds", list(range(1001)), "seeds: 1 variant x 1,001 seeds is 1,001 runs; a study"),
        ("heatmaps", [0] * 101, "heatmaps: at most 100 entries"),
        ("length_buckets", list(range(1, 102)), "length_buckets: at most 100 entries"),
    ],
    ids=[
        "seed",
        "bootstrap",
        "samples",
        "a split the corpus lacks",
        "a heatmap line",
        "runs",
        "heatmap lines",
        "buckets",
    ],
)
def test_absurd_spec_values_are_refused_before_any_run(tmp_path, toy_dir, key, value, words):
    """Each used to start the study: a seed past 2**63 failed every run, 10**12
    resamples ran for ever, a missing split failed every run after it trained, a
    heatmap line past the end drew nothing."""
    spec = write_spec(tmp_path, toy_dir, {"global": []})
    spec.write_text(yaml.safe_dump({**yaml.safe_load(spec.read_text()), key: value}))
    result = runner.invoke(app, ["compare", str(spec)])
    assert result.exit_code == 2 and words in result.output, result.output
    assert f"{spec}: {key}" in " ".join(result.output.split())  # the file, as always
    assert not (tmp_path / "study").exists()


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_runs_scored_against_other_references_are_not_compared(tmp_path, toy_dir, tiny_run):
    """The same model, pointed at a copy of the corpus whose test line 3 differs: the
    paired test would pair unrelated sentences, so compare refuses, naming the line."""
    import torch

    data = tmp_path / "toy-changed"
    shutil.copytree(toy_dir, data)
    refs = (data / "test.tgt").read_text().splitlines()
    refs[2] = "a different reference"
    (data / "test.tgt").write_text("\n".join(refs) + "\n")
    run, other = (shutil.copytree(tiny_run, tmp_path / name) for name in ("run", "other"))
    payload = torch.load(other / "best.pt", weights_only=True)
    payload["config"]["data"]["dir"] = str(data)
    torch.save(payload, other / "best.pt")
    out = tmp_path / "cmp"
    args = ["--runs", str(run), "--runs", str(other), "--split", "test", "--out", str(out)]
    result = runner.invoke(app, ["compare", *args])
    assert result.exit_code == 2, result.output
    assert "test: " in result.output and "other references than" in result.output
    assert "(from line 3, of 15 and 15 lines)" in result.output
    assert not (out / "report.md").exists() and not (out / "results.json").exists()


@pytest.mark.slow  # a study's report: a second or more
def test_runs_that_search_differently_are_compared_with_a_warning(tmp_path, tiny_run):
    run, other = (shutil.copytree(tiny_run, tmp_path / name) for name in ("run", "other"))
    recipe = yaml.safe_load((other / "recipe.yaml").read_text())
    recipe["decode"] = {**recipe["decode"], "beam": 1, "batch_tokens": 999}
    (other / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    args = ["--runs", str(run), "--runs", str(other), "--split", "test", "--set", "figures=false"]
    result = runner.invoke(app, ["compare", *args, "--out", str(tmp_path / "cmp")])
    said = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert "the runs translate with different decode.beam: the comparison measures" in said
    assert "batch_tokens" not in said


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_runs_take_the_reports_keys_with_set_and_refuse_the_others(tmp_path, tiny_run):
    """--runs with --set: the keys that say how the report compares (a contrast of
    the runs by their names, the scores beside BLEU), checked as a spec's are; a key
    that says what to train, or an absurd value, is one line before any work."""
    a, b, c = (shutil.copytree(tiny_run, tmp_path / name) for name in ("a", "b", "c"))
    runs = ["--runs", str(a), "--runs", str(b), "--runs", str(c), "--split", "test"]
    out = tmp_path / "cmp"
    for sets, words in (
        (["seeds=[1,2]"], "--set seeds=[1,2]: --runs takes the report's keys (bootstrap,"),
        (["set+=train.lr=1"], "set+ says what a spec trains"),
        (["bootstrap=5"], "--set: bootstrap: use 100..100,000 resamples"),
        (["contrasts=[[b, nope]]"], "--set: contrasts[0]: 'nope' is not a variant"),
    ):
        args = [f"--set={text}" for text in sets]
        result = runner.invoke(app, ["compare", *runs, *args, "--out", str(out)])
        assert result.exit_code == 2 and words in result.output, result.output
        assert not out.exists()
    sets = ["contrasts=[[b, c]]", "scores=[ter]", "bootstrap=200", "heatmaps=[]"]
    result = runner.invoke(
        app, ["compare", *runs, *[f"--set={t}" for t in sets], "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    results = json.loads((out / "results.json").read_text())
    ((variant, reference),) = [(c["variant"], c["reference"]) for c in results["contrasts"]]
    assert (variant, reference) == ("b", "c")
    assert all("ter" in row and "chrf++" not in row for row in results["rows"])
    assert not list(out.glob("attention_*.png"))


def test_a_run_trained_under_an_old_default_is_not_reused_as_the_new(tmp_path, toy_dir):
    """Until hard attention's default estimator became gumbel, a spec's ``kind=hard``
    trained REINFORCE: the same request, another run. What the run measured on its
    data (local_m's ratio) and keys added since are no change."""
    spec = write_spec(
        tmp_path,
        toy_dir,
        {
            "global": [],
            "hard": ["model.attention.kind=hard"],
            "local_m": ["model.attention.kind=local_m"],
        },
        seeds=(1,),
    )
    _, (_, hard, local_m) = load_spec(spec)

    def trained(run, edit):
        run.run_dir.mkdir(parents=True)
        (run.run_dir / "requested.yaml").write_text(yaml.safe_dump(run.recipe))
        recipe = yaml.safe_load(run.cfg.to_yaml())
        edit(recipe)
        (run.run_dir / "recipe.yaml").write_text(yaml.safe_dump(recipe))

    trained(hard, lambda r: r["model"]["attention"].update(estimator="reinforce"))
    with pytest.raises(NmtError, match=r"model\.attention\.estimator 'reinforce', now 'gumbel'"):
        check_reusable(hard)

    def measured_and_older(recipe):
        recipe["model"]["attention"]["ratio"] = 1.22  # measured on the training data
        del recipe["train"]["alignment"]  # a key added since

    trained(local_m, measured_and_older)
    check_reusable(local_m)


def test_a_run_is_reused_for_what_its_recipe_means_not_how_it_is_spelt(tmp_path, toy_dir):
    """A run asked for without ``data.join`` is the run a spec asks for with
    ``data.join={}`` (a recipe that now joins, as it was before) or with a default
    named; a value that changes what is trained is another run."""
    spec = write_spec(
        tmp_path,
        toy_dir,
        {
            "global": [],
            "as_before": ["data.join={}"],
            "defaults_named": ["data.join.prob=0", "train.label_smoothing=0.1"],
            "joined": ["data.join.prob=0.1"],
        },
        seeds=(1,),
    )
    runs = {run.variant: run for run in load_spec(spec)[1]}
    plain = runs.pop("global")
    assert "label_smoothing" not in plain.recipe["train"] and "join" not in plain.recipe["data"]
    for run in runs.values():  # each holds a run that was asked for as the plain one
        run.run_dir.mkdir(parents=True)
        requested = {**plain.recipe, "run_dir": str(run.run_dir)}
        (run.run_dir / "requested.yaml").write_text(yaml.safe_dump(requested))
    check_reusable(runs["as_before"])
    check_reusable(runs["defaults_named"])
    with pytest.raises(NmtError, match="trained for a different recipe"):
        check_reusable(runs["joined"])


def test_a_second_study_in_one_out_dir_is_refused_before_any_work(tmp_path, toy_dir, tiny_run):
    """Two studies in one out_dir would race for its runs and its report: while one
    holds it, another exits 2 naming the directory, the owner and the key to change,
    and trains nothing; ``--runs`` into it is refused alike."""
    spec = write_spec(tmp_path, toy_dir, {"global": []}, seeds=(1,))
    out = tmp_path / "study"
    with owned(out, "out_dir"):
        owner = (out / "lock").read_text().strip()
        result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
        assert result.exit_code == 2, result.output
        said = " ".join(result.output.split())
        assert f"in use by another nmt process (pid {owner})" in said
        assert "set out_dir to a new directory" in said
        assert sorted(p.name for p in out.iterdir()) == ["lock"]
        run = shutil.copytree(tiny_run, tmp_path / "run")
        result = runner.invoke(app, ["compare", "--runs", str(run), "--out", str(out)])
        assert result.exit_code == 2
        assert "set --out to a new directory" in " ".join(result.output.split())
        assert sorted(p.name for p in out.iterdir()) == ["lock"]
        assert not (run / "results.json").exists()  # refused before evaluating the run


RECIPE_DIR = Path(__file__).resolve().parents[2] / "recipes"
SPECS = sorted(RECIPE_DIR.glob("compare-*.yaml"))


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.name)
def test_shipped_specs_load(spec, monkeypatch):
    monkeypatch.chdir(spec.parents[1])  # specs name their base recipe from the repo root
    loaded, runs = load_spec(spec)
    assert loaded.baseline_name in loaded.variants
    assert {r.variant for r in runs} == set(loaded.variants)
    headline = ("compare-toy.yaml", "compare-multi30k.yaml", "compare-multi30k-40ep.yaml")
    if spec.name in headline:  # every variant and trainer
        assert {r.cfg.model.attention.kind for r in runs} == {
            "global",
            "local_m",
            "local_p",
            "hard",
        }
        assert {r.cfg.train.trainer.kind for r in runs} == {"teacher_forcing", "scheduled_sampling"}


@pytest.mark.parametrize(
    "spec",
    ["compare-multi30k.yaml", "compare-multi30k-length.yaml", "compare-multi30k-train-short.yaml"],
)
def test_the_shipped_budget_studies_train_global_ss_as_the_ss_recipe(spec, monkeypatch):
    """The studies at the shipped budget train scheduled sampling with the schedule
    tuned on dev for recipes/multi30k-de-en-ss.yaml, not another one."""
    monkeypatch.chdir(RECIPE_DIR.parent)
    _, runs = load_spec(RECIPE_DIR / spec)
    ss = load_recipe(RECIPE_DIR / "multi30k-de-en-ss.yaml")
    trained = {r.cfg.train.trainer for r in runs if r.variant == "global+ss"}
    assert trained == {ss.train.trainer}


def test_the_demo_is_the_tours_budget_with_three_seeds(monkeypatch):
    """make demo's spec trains two of the tour's variants exactly as the tour does
    (the README reads its verdict as compare-toy.yaml's budget), with three seeds so
    that the significance rule can give one."""
    monkeypatch.chdir(RECIPE_DIR.parent)
    tour, tour_runs = load_spec(RECIPE_DIR / "compare-toy.yaml")
    demo, demo_runs = load_spec(RECIPE_DIR / "compare-toy-demo.yaml")
    assert demo.seeds == (1, 2, 3) and demo.splits == tour.splits
    assert set(demo.variants) == {"global", "local_m"}
    by_tour = {(r.variant, r.seed): r.cfg for r in tour_runs}
    for run in demo_runs:
        if run.seed == 1:  # the tour runs seed 1 only
            assert run.cfg == replace(by_tour[(run.variant, 1)], run_dir=run.cfg.run_dir)


def test_report_with_every_run_failed(tmp_path):
    failure = RunResult("global", 1, tmp_path / "r", "failed", "data.dir: no such file")
    report = Report("t", ("test",), [], [failure], "global", 100, {}, SignificanceSpec())
    write_markdown(tmp_path / "report.md", report)
    text = (tmp_path / "report.md").read_text()
    assert "## test" in text and "failed: data.dir: no such file" in text


@pytest.mark.slow
def test_jobs_give_the_outputs_of_one_job(tmp_path, toy_dir, monkeypatch):
    """Two runs at a time, each in its own process on half the threads: every run's
    translations and scores are those of the runs one at a time, and each worker
    decodes its run the spec's other ways (its log says so). A decoding added to the
    finished study is decoded two runs at a time too, and its log lines count runs,
    not the updates that stand still (they said 0.0 updates/s, ETA ?)."""
    variants = {"global": [], "local_m": ["model.attention.kind=local_m"]}
    outs = {}
    for jobs in (1, 2):
        spec = write_spec(tmp_path / f"jobs{jobs}", toy_dir, variants, seeds=(1,))
        data = yaml.safe_load(spec.read_text())
        data["decodings"] = {"greedy": ["decode.beam=1"]}
        spec.write_text(yaml.safe_dump(data))
        result = runner.invoke(app, ["compare", str(spec), "--device", "cpu", "--jobs", str(jobs)])
        assert result.exit_code == 0, result.output
        outs[jobs] = spec.parent / "study"
    log = (outs[2] / "runs/local_m/seed1/compare.log").read_text()
    assert "decoding local_m seed 1 as greedy (decode.beam=1)" in " ".join(log.split())
    for run in ("global/seed1", "local_m/seed1"):
        one, two = (outs[j] / "runs" / run for j in (1, 2))
        for hyp in ("test.hyp", "test@decode.beam=1.hyp"):
            assert (one / hyp).read_text() == (two / hyp).read_text()
    rows = [json.loads((outs[j] / "results.json").read_text())["rows"] for j in (1, 2)]
    assert [r["bleu"] for r in rows[0]] == [r["bleu"] for r in rows[1]]

    from nmt.launch import pool

    monkeypatch.setattr(pool, "SUMMARY_SECONDS", 0.0)  # a summary line at every poll
    spec = outs[2].parent / "spec.yaml"
    data = yaml.safe_load(spec.read_text())
    data["decodings"]["wide"] = ["decode.beam=3"]
    spec.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu", "--jobs", "2"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "2 runs, 2 at a time" in said
    assert re.search(r"study: [0-2]/2 runs done, [0-2] running, [\d.]+ runs/min", said)
    assert "updates" not in said
    assert (outs[2] / "runs/global/seed1/test@decode.beam=3.hyp").is_file()


DAMAGE = {  # files written (None: removed), and the warning said
    "entry": ({"results.json": '{"test": {"bleu": "x"}}'}, "'test' has a damaged entry"),
    "no hyp": ({"test.hyp": None}, "'test' has no test.hyp"),
    "short hyp": ({"test.hyp": "one line\n"}, "'test' has 1 line in test.hyp, not 15"),
    "summary": ({"summary.json": '{"steps": "x"}'}, "summary.json: damaged (not a summary"),
    "metrics": ({"summary.json": None, "metrics.jsonl": '[1]\n{"step": "x"}\nzzz\n'}, None),
}


@pytest.mark.slow
@pytest.mark.parametrize("damage", list(DAMAGE))
def test_compare_mends_what_it_derived_and_a_run_left_damaged(tmp_path, tiny_run, damage):
    """Scores and hypotheses are evaluated again; a damaged summary gives way to the
    metrics log, damaged metrics records are left out. Each used to fail the run
    with a bare KeyError or TypeError, or to take a damaged entry as scores."""
    from nmt.decoding.evaluate import evaluate

    a, b = (shutil.copytree(tiny_run, tmp_path / name) for name in ("a", "b"))
    evaluate(a, ["test"], device="cpu")
    files, warning = DAMAGE[damage]
    for name, text in files.items():
        if text is None:
            (a / name).unlink()
        else:
            (a / name).write_text(text)
    out = tmp_path / "cmp"
    args = ["--runs", str(a), "--runs", str(b), "--split", "test", "--out", str(out)]
    result = runner.invoke(app, ["compare", *args, "--set", "figures=false"])
    said = " ".join(result.output.split())
    assert result.exit_code == 0, result.output
    assert warning is None or warning in said
    assert "failed" not in (out / "report.md").read_text()
    entry = json.loads((a / "results.json").read_text())["test"]
    assert isinstance(entry["bleu"], float) and entry["sentences"] == 15
    assert len((a / "test.hyp").read_text().splitlines()) == 15


@pytest.mark.parametrize("text", ["run_dir: x\n", "run_dir: [1]\n", "- a list\n"])
def test_a_damaged_run_recipe_is_one_line_naming_it(tmp_path, tiny_run, text):
    a, b = (shutil.copytree(tiny_run, tmp_path / name) for name in ("a", "b"))
    (a / "recipe.yaml").write_text(text)
    args = ["--runs", str(a), "--runs", str(b), "--out", str(tmp_path / "cmp")]
    result = runner.invoke(app, ["compare", *map(str, args)])
    assert result.exit_code == 2 and f"{a / 'recipe.yaml'}: " in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "cmp").exists()


def test_gold_alignments_of_another_length_are_refused_before_any_run(tmp_path, toy_dir):
    """AER would pair other sentences' links (zip stops at the shorter list)."""
    data = shutil.copytree(toy_dir, tmp_path / "toy")
    lines = (data / "test.align").read_text().splitlines()
    (data / "test.align").write_text("\n".join(lines[:-1]) + "\n")
    spec = write_spec(tmp_path, data, {"global": []})
    result = runner.invoke(app, ["compare", str(spec)])
    said = " ".join(result.output.split())
    assert (
        result.exit_code == 2
        and f"splits: {data / 'test.align'}: 14 lines, but test has 15" in said
    )
    assert not (tmp_path / "study").exists()


@pytest.mark.slow
def test_a_length_study_with_joined_and_held_out_splits_reports_every_diagnostic(tmp_path, toy_dir):
    """Train short (data.train_max_words), test on the held-out long pairs (train>N) and
    on the test set joined three sentences at a time (test*3), and three sentences of
    one document at a time (test~3, a document's last group shorter): every
    diagnostic is in results.json and named in report.md (the joined input's attention
    grid, a figure: test_html's study draws it)."""
    corpus = with_documents(toy_dir, tmp_path)
    spec = write_spec(
        tmp_path,
        corpus,
        {"global": [], "local_p": ["model.attention.kind=local_p", "model.attention.window=2"]},
        seeds=(1,),
        heatmaps=(0,),
    )
    data = yaml.safe_load(spec.read_text())
    data["splits"] = ["test", "test*3", "test~3", "train>20"]
    data["set"] += ["data.train_max_words=20"]
    spec.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "study"
    long = [s for s in (toy_dir / "train.src").read_text().splitlines() if len(s.split()) > 20]
    hyps = (out / "runs/global/seed1/train>20.hyp").read_text().splitlines()
    assert len(hyps) == len(long) > 0
    assert len((out / "runs/local_p/seed1/test*3.hyp").read_text().splitlines()) == 5
    docs = (corpus / "test.doc").read_text().splitlines()
    groups = sum(-(-len(r) // 3) for r in documents(docs))
    assert len((out / "runs/local_p/seed1/test~3.hyp").read_text().splitlines()) == groups
    results = json.loads((out / "results.json").read_text())
    assert {(r["variant"], r["split"]) for r in results["rows"]} == {
        (v, s) for v in ("global", "local_p") for s in ("test", "test*3", "test~3", "train>20")
    }
    for row in results["rows"]:
        assert row["length_ratio"] > 0 and 0 <= row["repetition"] <= 1
        assert 0 <= row["dropped"] <= 1 and row["backward"] >= 0
        assert len(row["word_f"]) == 9 and all(0 <= f <= 1 for f in row["word_f"].values())
        assert all("length_ratio" in b for b in row["length_buckets"].values())
        centred = row["variant"] == "local_p"  # the predicted centre's distance from alignment
        assert (row["center_distance"] is not None) == centred
        assert not centred or 0 <= row["center_distance"] < 30
        joined = row["split"] in ("test*3", "test~3")  # which of three captions were translated
        assert ("caption_covered" in row) == joined and ("caption_recall" in row) == joined
        if joined:
            assert len(row["caption_covered"]) == len(row["caption_recall"]) == 3
            assert all(0 <= c <= 1 for c in row["caption_covered"])
            assert all(0 <= r <= 100 for r in row["caption_recall"])
    report = (out / "report.md").read_text()
    named = ("length ratio", "repetition", "dropped", "backward", "centre dist", "Word accuracy")
    named += ("Which captions each variant translated",)
    for words in named:
        assert words in report
    assert "## test*3" in report and "## train>20" in report


@pytest.mark.slow
def test_decodings_evaluate_every_run_again_without_training(tmp_path, toy_dir, monkeypatch):
    """A spec's decodings (GNMT's coverage penalty, the oracle length) score every
    trained run again, as the variants VARIANT@NAME, tested against the baseline and
    named in a contrast; a second call reuses every evaluation."""
    spec = write_spec(
        tmp_path,
        toy_dir,
        {"global": [], "local_m": ["model.attention.kind=local_m", "model.attention.window=2"]},
        seeds=(1,),
    )
    data = yaml.safe_load(spec.read_text())
    data["splits"] = ["test", "test*3"]
    data["decodings"] = {"cov": ["decode.coverage=0.5"], "oracle": ["length=oracle"]}
    data["contrasts"] = [["global@cov", "global"]]
    spec.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "study"
    results = json.loads((out / "results.json").read_text())
    names = {"global", "local_m", "global@cov", "local_m@cov", "global@oracle", "local_m@oracle"}
    assert {r["variant"] for r in results["rows"]} == names
    own = json.loads((out / "runs/global/seed1/results.json").read_text())
    assert {"test", "test*3", "test@decode.coverage=0.5", "test*3@length=oracle"} <= set(own)
    assert all(r["p_value"] is not None for r in results["rows"] if r["variant"] != "global")
    run = out / "runs/global/seed1"
    oracle = (run / "test*3@length=oracle.hyp").read_text()
    assert oracle != (run / "test*3.hyp").read_text()
    assert oracle.count("\n") == (run / "test*3.hyp").read_text().count("\n") == 5
    assert [c["variant"] for c in results["contrasts"]] == ["global@cov", "global@cov"]

    from nmt.compare import analysis
    from nmt.launch import runs

    calls, read = [], []
    monkeypatch.setattr(runs, "evaluate", lambda *a, **k: calls.append(a))
    reading = analysis.attention_figures
    monkeypatch.setattr(
        analysis, "attention_figures", lambda *a, **k: read.append(a) or reading(*a, **k)
    )
    for run in (out / "runs").glob("*/seed1"):  # the figures kept beside each run
        shutil.rmtree(run / "analysis")
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert calls == []  # every decoding of every run was reused
    # the attention read with the references is read once a run and split, not again
    # for each of its decodings, and the report is the same
    assert len(read) == 2 * 2  # two runs, two splits
    assert json.loads((out / "results.json").read_text())["rows"] == results["rows"]
    # written again, the report reads the figures kept beside the runs, no model
    read.clear()
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert result.exit_code == 0 and read == [], result.output
    assert json.loads((out / "results.json").read_text())["rows"] == results["rows"]


@pytest.mark.slow
def test_a_study_stopped_mid_way_keeps_the_decodings_of_its_finished_runs(
    tmp_path, toy_dir, monkeypatch
):
    """Each run is decoded the spec's other ways as soon as it is tested, not after
    every run has trained: a study stopped (Ctrl-C) while its second run starts keeps
    the first run's decodings, and the next call decodes only the second run."""
    from nmt.launch import runs

    spec = write_spec(tmp_path, toy_dir, {"global": []})
    data = yaml.safe_load(spec.read_text())
    data["decodings"] = {"greedy": ["decode.beam=1"]}
    spec.write_text(yaml.safe_dump(data))
    real_train, real_evaluate, trained, evaluated = runs.train, runs.evaluate, [], []

    def train_then_stop(cfg, **kwargs):
        if trained:  # the second run: the user presses Ctrl-C as it starts
            raise KeyboardInterrupt
        trained.append(cfg.train.seed)
        return real_train(cfg, **kwargs)

    monkeypatch.setattr(runs, "train", train_then_stop)
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert result.exit_code == 130, result.output
    first = tmp_path / "study/runs/global/seed1"
    assert {"test", "test@decode.beam=1"} <= set(json.loads((first / "results.json").read_text()))
    assert (first / "test@decode.beam=1.hyp").read_text().count("\n") == 15

    monkeypatch.setattr(runs, "train", real_train)
    monkeypatch.setattr(
        runs,
        "evaluate",
        lambda run, *a, **k: evaluated.append(run.name) or real_evaluate(run, *a, **k),
    )
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert evaluated == ["seed2", "seed2"]  # its test split, then its decoding: seed 1 reused
    rows = json.loads((tmp_path / "study/results.json").read_text())["rows"]
    assert {r["variant"] for r in rows} == {"global", "global@greedy"}


def test_a_decoding_that_makes_no_sense_is_refused_before_training(tmp_path, toy_dir):
    spec = write_spec(tmp_path, toy_dir, {"global": []}, seeds=(1,))
    data = yaml.safe_load(spec.read_text())
    data["decodings"] = {"bad": ["decode.coverage=-2"]}
    spec.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert result.exit_code == 2
    assert "decodings.bad: --set decode.coverage: must be in [0, 100]" in result.output
    assert not (tmp_path / "study" / "runs").exists()


@pytest.mark.slow
def test_runs_without_their_checkpoints_are_reported_from_their_translations(tmp_path, tiny_run):
    """A run brought back from a cluster without its checkpoints (or pruned) is
    compared from its translations: every score and text figure, each caption's
    recall on a joined split, and no figure that needs the model's attention; a split
    it never translated is refused, naming the run."""
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(tiny_run, a)
    shutil.copytree(tiny_run, b)
    args = ["--runs", str(a), "--runs", str(b), "--split", "test", "--split", "test*2"]
    quick = ["--set", "figures=false"]  # the figures are drawn in the second report
    with_model = runner.invoke(app, ["compare", *args, *quick, "--out", str(tmp_path / "one")])
    assert with_model.exit_code == 0, with_model.output
    for run in (a, b):
        for checkpoint in run.glob("*.pt"):
            checkpoint.unlink()
    result = runner.invoke(app, ["compare", *args, "--out", str(tmp_path / "two")])
    assert result.exit_code == 0, result.output
    first, second = (
        {
            (r["variant"], r["split"]): r
            for r in json.loads((out / "results.json").read_text())["rows"]
        }
        for out in (tmp_path / "one", tmp_path / "two")
    )
    assert first.keys() == second.keys() == {(v, s) for v in "ab" for s in ("test", "test*2")}
    for key, row in second.items():
        for same in ("bleu", "chrf", "length_ratio", "repetition", "caption_recall"):
            assert row.get(same) == first[key].get(same), same
        assert row["entropy"] is None and row["params"] is None and "dropped" not in row
        if key[1] == "test*2":
            assert row["caption_covered"] == [None, None]
            assert first[key]["caption_covered"][0] is not None
    report = (tmp_path / "two" / "report.md").read_text()
    assert "| – / " in report and "2 of 2 runs had no best.pt" in report
    assert "had no best.pt" not in (tmp_path / "one" / "report.md").read_text()
    args += ["--split", "valid"]
    result = runner.invoke(app, ["compare", *args, "--out", str(tmp_path / "three")])
    assert result.exit_code == 2 and f"--runs {a}: no best.pt to translate valid" in result.output
