"""``train.log_to: [jsonl, tensorboard]``: metrics.jsonl mirrored, plus attention."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nmt.errors import NmtError
from nmt.launch.runs import check_reusable
from nmt.setup.compare import PlannedRun, load_spec
from nmt.training.run import train
from nmt.training.tensorboard import TensorBoardLog
from nmt.training.trackers import tag
from tests.compare.test_compare import write_spec
from tests.conftest import require_extra


def scalars(log_dir: Path) -> dict[str, dict[int, list[float]]]:
    """Tag -> step -> values (a training and a validation record can share a step)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "images": 0})
    events.Reload()
    out: dict[str, dict[int, list[float]]] = {}
    for name in events.Tags()["scalars"]:
        for e in events.Scalars(name):
            out.setdefault(name, {}).setdefault(e.step, []).append(e.value)
    out["images"] = {e.step: [] for e in events.Images("attention/dev_sentence")}
    return out


@pytest.mark.slow
def test_every_record_is_mirrored_with_epsilon_reward_and_a_heatmap(tiny_config):
    require_extra("tensorboard", "tensorboard")
    cfg = tiny_config(
        model={"attention": {"kind": "hard", "estimator": "reinforce"}},
        train={
            "trainer": {"kind": "scheduled_sampling", "schedule": "linear", "k": 1.0, "c": 0.1},
            "log_to": ["jsonl", "tensorboard"],
        },
    )
    train(cfg, device="cpu")
    logged = scalars(Path(cfg.run_dir) / "tb")
    records = [
        json.loads(x) for x in (Path(cfg.run_dir) / "metrics.jsonl").read_text().split("\n") if x
    ]
    for record in records:
        for key, value in record.items():
            if key != "step":
                assert pytest.approx(value, rel=1e-6) in logged[tag(key)][record["step"]]
    assert "scheduled_sampling/gold_prob" in logged and "attention/reward" in logged
    validations = {r["step"] for r in records if "valid_loss" in r}
    assert set(logged["images"]) == validations == set(logged["attention/dev_entropy"])
    # the recipe as hyperparameters (TensorBoard's HPARAMS tab filters runs by them)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    events = EventAccumulator(str(Path(cfg.run_dir) / "tb"))
    events.Reload()
    content = events.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    hparams = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info.hparams
    assert hparams["model.attention.kind"].string_value == "hard"
    assert hparams["train.max_steps"].number_value == cfg.train.max_steps


def test_compare_gives_each_run_its_own_log_dir_and_reuses_across_logging(tmp_path, toy_dir):
    variants = {"global": [], "local_m": ["model.attention.kind=local_m"]}
    _, plain = load_spec(write_spec(tmp_path, toy_dir, variants))  # then logging too
    logging = ["train.log_to=[jsonl, tensorboard]", "train.save_every=100"]
    loaded, runs = load_spec(write_spec(tmp_path, toy_dir, variants, extra_set=logging))
    study = Path(loaded.out_dir)
    assert {r.cfg.train.tensorboard_dir for r in runs} == {
        str(study / "tb" / v / f"seed{s}") for v in ("global", "local_m") for s in (1, 2)
    }
    before = plain[0]
    before.run_dir.mkdir(parents=True)
    (before.run_dir / "requested.yaml").write_text(json.dumps(before.recipe))
    check_reusable(runs[0])  # the same run, logging to TensorBoard, saving more: reusable
    other = PlannedRun(runs[0].variant, 1, before.run_dir, runs[-1].recipe, runs[-1].cfg)
    with pytest.raises(NmtError, match="trained for a different recipe"):
        check_reusable(other)


def test_an_unwritable_log_dir_is_one_line_naming_it(tmp_path):
    require_extra("tensorboard", "tensorboard")
    (tmp_path / "tb").write_text("a file where the log directory should be")
    with pytest.raises(NmtError, match="tb: cannot write TensorBoard logs"):
        TensorBoardLog(tmp_path / "tb")


def test_a_log_dir_that_is_a_file_is_refused_before_the_run_builds(
    tiny_config, tmp_path, monkeypatch
):
    """It used to fail only once the data was prepared and the model built."""
    require_extra("tensorboard", "tensorboard")
    import nmt.training.run

    def build(*args, **kwargs):
        raise AssertionError("built before the log dir was checked")

    monkeypatch.setattr(nmt.training.run, "build", build)
    blocker = tmp_path / "a-file"
    blocker.write_text("mine\n")
    cfg = tiny_config(
        train={"log_to": ["jsonl", "tensorboard"], "tensorboard_dir": str(blocker), "max_steps": 1}
    )
    with pytest.raises(
        NmtError, match=r"train\.tensorboard_dir: .*a-file: a file, not a directory"
    ):
        train(cfg, device="cpu")
    assert blocker.read_text() == "mine\n"


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_a_full_disk_under_the_log_dir_stops_logging_and_the_run_finishes(
    tiny_config, monkeypatch, capfd
):
    """The events are written by the writer's own thread; there a full disk printed
    a traceback, another at close, and the run ended with exit 1 and no summary."""
    require_extra("tensorboard", "tensorboard")
    from tensorboard.summary.writer import record_writer

    written = []
    original = record_writer.RecordWriter.write

    def write(self, data):
        written.append(1)
        if len(written) > 3:  # the file's header and a few records fit, then the disk fills
            raise OSError(28, "No space left on device")
        return original(self, data)

    monkeypatch.setattr(record_writer.RecordWriter, "write", write)
    cfg = tiny_config(train={"log_to": ["jsonl", "tensorboard"], "max_steps": 6})
    summary = train(cfg, device="cpu")
    err = capfd.readouterr().err
    assert summary["steps"] == 6 and (Path(cfg.run_dir) / "summary.json").is_file()
    assert err.count("cannot write TensorBoard logs (No space left on device)") == 1, err
    assert "Traceback" not in err and "Exception in thread" not in err
