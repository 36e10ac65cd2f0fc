"""``train.log_to`` beyond TensorBoard: MLflow (a local SQLite store) and Weights &
Biases (offline), each read back with its own library; the recipe as hyperparameters
in every tracker, so that runs can be filtered by attention kind."""

from __future__ import annotations

import glob
import json
import socket
import struct
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.errors import ConfigError, NmtError
from nmt.io.rundir import recipe_changes
from nmt.setup.compare import load_spec
from nmt.setup.recipe import config_from_dict
from nmt.training.run import train
from nmt.training.trackers import hyperparameters, tag
from nmt.training.tracking import publish_results
from tests.compare.test_compare import write_spec
from tests.conftest import require_extra

runner = CliRunner()


def jsonl(run_dir: Path) -> list[dict]:
    text = (run_dir / "metrics.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line]


def mlflow_runs(uri: str, experiment: str, where: str = "") -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    return [] if found is None else client.search_runs([found.experiment_id], where)


def wandb_records(run_dir: Path) -> list:
    """Every record of W&B's offline run files under ``run_dir``, parsed with W&B's
    own protocol buffers (the files are LevelDB-style logs: 32 KiB blocks of records
    with a 7-byte header, after W&B's 7-byte file header)."""
    from wandb.proto import wandb_internal_pb2

    out = []
    for path in sorted(glob.glob(str(run_dir / "wandb" / "offline-run-*" / "run-*.wandb"))):
        data, pos, pending = Path(path).read_bytes(), 7, b""
        while pos + 7 <= len(data):
            if (space := 32768 - pos % 32768) < 7:  # a block's tail too short for a header
                pos += space
                continue
            _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
            pending += data[pos + 7 : pos + 7 + length]
            pos += 7 + length
            if kind in (1, 4):  # a whole record, or the last piece of one
                record = wandb_internal_pb2.Record()
                record.ParseFromString(pending)
                out.append(record)
                pending = b""
    return out


@pytest.mark.slow
def test_mlflow_and_wandb_get_every_record_and_the_recipe(tiny_config):
    require_extra("mlflow", "mlflow")
    require_extra("wandb", "wandb")
    cfg = tiny_config(
        model={"attention": {"kind": "local_m"}},
        train={"log_to": ["jsonl", "mlflow", "wandb"], "max_steps": 6, "log_every": 2},
    )
    train(cfg, device="cpu")
    run_dir = Path(cfg.run_dir)
    records = jsonl(run_dir)
    ids = json.loads((run_dir / "trackers.json").read_text())

    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{(run_dir / 'mlflow.db').resolve()}"
    (run,) = mlflow_runs(uri, "nmt", "params.`model.attention.kind` = 'local_m'")
    assert run.info.run_id == ids["mlflow"] and run.info.status == "FINISHED"
    assert run.data.tags["attention"] == "local_m"
    resolved = config_from_dict(yaml.safe_load((run_dir / "recipe.yaml").read_text()))
    assert run.data.params == {k: str(v) for k, v in hyperparameters(resolved).items()}
    client = MlflowClient(tracking_uri=uri)
    for key in ("valid_bleu", "loss"):
        logged = {m.step: m.value for m in client.get_metric_history(run.info.run_id, tag(key))}
        assert logged == {r["step"]: pytest.approx(r[key]) for r in records if key in r}
    assert not mlflow_runs(uri, "nmt", "params.`model.attention.kind` = 'global'")

    wandb = wandb_records(run_dir)
    (started,) = [r.run for r in wandb if r.WhichOneof("record_type") == "run"]
    assert started.run_id == ids["wandb"] and started.project == "nmt"
    assert list(started.tags) == ["local_m"]
    config = {c.key: json.loads(c.value_json) for c in started.config.update}
    assert config["model.attention.kind"] == "local_m"
    history = [
        {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
        for r in wandb
        if r.WhichOneof("record_type") == "history"
    ]
    for key in ("valid_bleu", "loss"):
        logged = {h["_step"]: h[tag(key)] for h in history if tag(key) in h}
        assert logged == {r["step"]: pytest.approx(r[key]) for r in records if key in r}


@pytest.mark.slow
def test_a_resumed_run_continues_its_mlflow_run(tiny_config):
    require_extra("mlflow", "mlflow")
    keys = {"log_to": ["jsonl", "mlflow"], "lr_schedule": "inverse_sqrt", "valid_every": 2}
    cfg = tiny_config(train={**keys, "max_steps": 2})
    train(cfg, device="cpu")
    uri = f"sqlite:///{(Path(cfg.run_dir) / 'mlflow.db').resolve()}"
    (first,) = mlflow_runs(uri, "nmt")
    train(tiny_config(train={**keys, "max_steps": 4}), device="cpu", resume=True)
    (again,) = mlflow_runs(uri, "nmt")
    assert again.info.run_id == first.info.run_id and again.info.status == "FINISHED"

    from mlflow.tracking import MlflowClient

    history = MlflowClient(tracking_uri=uri).get_metric_history(first.info.run_id, "valid/loss")
    assert sorted(m.step for m in history) == [2, 4]


@pytest.mark.slow
def test_a_failing_tracker_is_one_warning_and_the_run_finishes(tiny_config, tmp_path, capfd):
    require_extra("mlflow", "mlflow")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    uri = f"sqlite:///{blocker}/mlflow.db"  # a database inside a file: cannot be made
    cfg = tiny_config(train={"log_to": ["jsonl", "mlflow"], "mlflow_uri": uri, "max_steps": 2})
    summary = train(cfg, device="cpu")
    err = capfd.readouterr().err
    assert summary["steps"] == 2 and "a-file" in summary["tracker_failures"]["mlflow"]
    assert err.count("train.log_to: mlflow failed") == 1, err
    assert "Traceback" not in err and "ERROR" not in err


@pytest.mark.slow
def test_an_unreachable_mlflow_server_costs_seconds_not_minutes(tiny_config, capfd):
    """A closed port: MLflow's own 7 retries with backoff stalled a 4-update run for
    over 4 minutes before the one warning."""
    require_extra("mlflow", "mlflow")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    cfg = tiny_config(train={"log_to": ["jsonl", "mlflow"], "mlflow_uri": uri, "max_steps": 2})
    start = time.monotonic()
    summary = train(cfg, device="cpu")
    assert time.monotonic() - start < 60
    assert "mlflow" in summary["tracker_failures"]
    assert capfd.readouterr().err.count("train.log_to: mlflow failed") == 1


@pytest.mark.slow
def test_a_study_of_two_workers_logs_every_run_to_a_new_store(tmp_path, toy_dir):
    """Both workers start at once and create the SQLite store's tables: one died on
    "duplicate column name" and the study exited 0 with half its runs in MLflow."""
    require_extra("mlflow", "mlflow")
    variants = {"global": [], "local_m": ["model.attention.kind=local_m"]}
    spec = write_spec(
        tmp_path, toy_dir, variants, seeds=(1,), extra_set=["train.log_to=[jsonl, mlflow]"]
    )
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu", "--jobs", "2"])
    assert result.exit_code == 0, result.output
    study = tmp_path / "study"
    names = {r.info.run_name for r in mlflow_runs(f"sqlite:///{study / 'mlflow.db'}", "study")}
    assert names == {"global/seed1", "local_m/seed1"}
    assert "train.log_to failed" not in (study / "report.md").read_text()


def test_logging_keys_added_to_an_interrupted_run_do_not_change_it():
    """A study resumed with log_to: mlflow sets the trackers' keys on every run;
    a resume refused them as a change of the run."""
    old = {"train": {"log_to": ["jsonl"], "lr": 1e-3}}
    new = {"train": {"log_to": ["jsonl", "mlflow", "wandb"], "lr": 1e-3,
                     "mlflow_uri": "sqlite:///s/mlflow.db", "wandb_dir": "s",
                     "experiment": "s", "run_name": "global/seed1"}}  # fmt: skip
    assert len(recipe_changes(old, new, Path("last.pt"))) == 5


@pytest.mark.parametrize(
    "module, tracker",
    [("torch.utils.tensorboard", "tensorboard"), ("mlflow", "mlflow"), ("wandb", "wandb")],
)
def test_without_the_extra_asking_for_it_names_the_install(
    monkeypatch, tiny_config, module, tracker
):
    monkeypatch.setitem(sys.modules, module, None)
    cfg = tiny_config(train={"log_to": ["jsonl", tracker]})
    with pytest.raises(NmtError, match=rf"pip install 'nmt-attention\[{tracker}\]'"):
        train(cfg, device="cpu")
    assert not (Path(cfg.run_dir) / "recipe.yaml").exists()  # refused before any writing


@pytest.mark.parametrize(
    "train_keys, message",
    [
        ({"log_to": ["jsonl", "comet"]}, "unknown comet; valid: jsonl, tensorboard, mlflow"),
        ({"log_to": ["tensorboard"]}, "must include jsonl"),
        ({"tensorboard_dir": "tb"}, "only train.log_to: [jsonl, tensorboard] uses it"),
        ({"mlflow_uri": "sqlite:///x.db"}, "only train.log_to: [jsonl, mlflow] uses it"),
        ({"wandb_dir": "w"}, "only train.log_to: [jsonl, wandb] uses it"),
        ({"experiment": " "}, "must not be empty"),
    ],
)
def test_tracker_settings_are_checked(tiny_config, train_keys, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        tiny_config(train=train_keys)


def test_a_study_logs_to_one_store_under_its_name(tmp_path, toy_dir):
    variants = {"global": [], "local_m": ["model.attention.kind=local_m"]}
    spec = write_spec(
        tmp_path, toy_dir, variants, extra_set=["train.log_to=[jsonl, mlflow, wandb]"]
    )
    loaded, runs = load_spec(spec)
    study = Path(loaded.out_dir)
    assert {r.cfg.train.mlflow_uri for r in runs} == {
        f"sqlite:///{(study / 'mlflow.db').resolve()}"
    }
    assert {r.cfg.train.wandb_dir for r in runs} == {str(study)}
    assert {r.cfg.train.experiment for r in runs} == {study.name}
    assert sorted(r.cfg.train.run_name for r in runs) == sorted(
        f"{v}/seed{s}" for v in ("global", "local_m") for s in (1, 2)
    )


@pytest.mark.slow
def test_an_evaluated_run_keeps_its_scores_and_files_in_mlflow_and_wandb(tiny_recipe, tmp_path):
    """nmt train's test scores (every split, every metric) and the run's files (recipe,
    vocabulary, scores, best.pt) reach the run's MLflow and W&B runs; a later nmt
    evaluate adds its splits; log_checkpoint: false keeps the checkpoint out."""
    require_extra("mlflow", "mlflow")
    require_extra("wandb", "wandb")
    recipe = tiny_recipe(
        train={"log_to": ["jsonl", "mlflow", "wandb"], "tags": {"team": "mt"}},
        data={"test": ["test"]},
    )
    result = runner.invoke(app, ["train", str(recipe), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    run_dir = tmp_path / "run"
    result = runner.invoke(app, ["evaluate", str(run_dir), "--split", "test*2", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    results = json.loads((run_dir / "results.json").read_text())
    ids = json.loads((run_dir / "trackers.json").read_text())

    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{(run_dir / 'mlflow.db').resolve()}"
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(ids["mlflow"])
    assert run.info.status == "FINISHED" and run.data.tags["team"] == "mt"
    assert run.data.metrics["test/test/bleu"] == pytest.approx(results["test"]["bleu"])
    assert run.data.metrics["test/test_2/chrf"] == pytest.approx(results["test*2"]["chrf"])
    kept = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"recipe.yaml", "results.json", "spm.model", "best.pt"} <= kept
    artifacts = Path(run.info.artifact_uri.removeprefix("file://"))
    assert artifacts.is_relative_to(run_dir.resolve())  # beside the store, not in the cwd
    assert json.loads((artifacts / "results.json").read_text()) == results

    records = wandb_records(run_dir)
    summary = {
        i.key or "/".join(i.nested_key): json.loads(i.value_json)
        for r in records
        if r.WhichOneof("record_type") == "summary"
        for i in r.summary.update
    }
    assert summary["test/test/bleu"] == pytest.approx(results["test"]["bleu"])
    assert summary["test/test_2/bleu"] == pytest.approx(results["test*2"]["bleu"])
    (started, *_) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert "team=mt" in list(started.tags)
    files = {
        e.path
        for r in records
        if r.WhichOneof("record_type") == "artifact"
        for e in r.artifact.manifest.contents
    }
    assert {"recipe.yaml", "results.json", "spm.model", "best.pt"} <= files

    def without_checkpoint() -> list[set[str]]:  # the W&B artifacts that leave best.pt out
        manifests = [
            {e.path for e in r.artifact.manifest.contents}
            for r in wandb_records(run_dir)
            if r.WhichOneof("record_type") == "artifact"
        ]
        return [m for m in manifests if "results.json" in m and "best.pt" not in m]

    assert without_checkpoint() == []
    recipe_file = run_dir / "recipe.yaml"
    kept_recipe = yaml.safe_load(recipe_file.read_text())
    kept_recipe["train"]["log_checkpoint"] = False
    recipe_file.write_text(yaml.safe_dump(kept_recipe))
    publish_results(run_dir)
    assert len(without_checkpoint()) == 1
