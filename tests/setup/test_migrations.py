"""Every migration of nmt.setup.migrations, on what the earlier layout wrote: checkpoints
of format version 1 load through the steps to today's and compute the same."""

from __future__ import annotations

import shutil

import pytest
import torch

from nmt.data.vocab import PAD
from nmt.errors import NmtError
from nmt.io import checkpoint
from nmt.model.load import load_model
from nmt.setup import migrations
from nmt.setup.recipe import config_from_dict
from tests.helpers import random_batch


def version_1_names(weights: dict) -> dict:
    """Today's tensors under the names a version-1 checkpoint gave them: the output
    layer was ``generator``, and before fusion became a decoder-layer module it
    wrapped the cross-attention (its variant under ``attn``, w_q in the score)."""
    out = {}
    for name, value in weights.items():
        if name == "output.weight":
            name = "generator.weight"
        layer, _, rest = name.partition(".cross_attn.")
        if rest:
            name = f"{layer}.cross_attn.attn.{rest}"
        layer, _, rest = name.partition(".fusion.")
        if rest == "query_term":
            name = f"{layer}.cross_attn.attn.score.w_q"
        elif rest:
            name = f"{layer}.cross_attn.{rest}"
        out[name] = value
    return out


def rebuilt(tiny_run, model_cfg: dict):
    """A model of ``model_cfg`` with the tiny run's vocabulary and perturbed weights,
    and the run's checkpoint payload."""
    payload = checkpoint.load(tiny_run / "best.pt")
    config = {**payload["config"], "model": model_cfg}
    vocab = load_model(tiny_run, torch.device("cpu")).model.output.weight.size(0)
    model = type(load_model(tiny_run, torch.device("cpu")).model)(
        config_from_dict(config).model, vocab, vocab, PAD, True
    )
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)  # w_q and everything else away from its start
    return model, payload, config


def save_version_1(path, payload: dict, config: dict, weights: dict) -> None:
    """A checkpoint as version 1 wrote it: its recipe without a version of its own."""
    old = {k: v for k, v in payload.items() if k not in ("format", "version", "model")}
    config = {k: v for k, v in config.items() if k != "version"}
    checkpoint.save(path, {**old, "version": 1, "config": config, "model": weights})


def same_outputs(a, b) -> None:
    src, tgt = random_batch([5, 7]), random_batch([4, 6])
    torch.testing.assert_close(a.eval()(src, tgt), b.eval()(src, tgt))


@pytest.mark.parametrize("score", ["dot", "trilinear"])
def test_a_version_1_fused_checkpoint_of_the_earlier_layout_translates_the_same(
    tiny_run, tmp_path, score
):
    config = checkpoint.load(tiny_run / "best.pt")["config"]
    model_cfg = {**config["model"], "decoder": {"kind": "standard", "fusion": "bidaf"}}
    model_cfg["attention"] = {**model_cfg["attention"], "score": score}
    fused, payload, _ = rebuilt(tiny_run, model_cfg)
    old_model = {**model_cfg, "decoder": {"kind": "standard"}}
    old_model["attention"] = {**model_cfg["attention"], "fusion": "bidaf"}
    weights = version_1_names(fused.state_dict())
    assert any(".cross_attn.attn." in k for k in weights) and "generator.weight" in weights
    save_version_1(tmp_path / "old.pt", payload, {**config, "model": old_model}, weights)
    same_outputs(load_model(tmp_path / "old.pt", torch.device("cpu")).model, fused)


def test_a_version_1_hard_attention_checkpoint_drops_its_update_counter(tiny_run, tmp_path):
    """Version 1 kept Gumbel's update counter in a buffer beside each hard attention
    layer; the update now reaches the layer with its queries."""
    config = checkpoint.load(tiny_run / "best.pt")["config"]
    model_cfg = {**config["model"], "attention": {"kind": "hard", "estimator": "gumbel"}}
    model, payload, full = rebuilt(tiny_run, model_cfg)
    weights = version_1_names(model.state_dict())
    for i in range(len(model.decoder)):
        weights[f"decoder.{i}.cross_attn.updates"] = torch.tensor(7)
    upgraded = migrations.upgrade_checkpoint({"version": 1, "model": weights}, "x")
    assert upgraded["version"] == migrations.VERSION
    assert list(upgraded["model"]) == list(model.state_dict())  # names, and their order
    save_version_1(tmp_path / "old.pt", payload, full, weights)
    same_outputs(load_model(tmp_path / "old.pt", torch.device("cpu")).model, model)


@pytest.mark.parametrize("version", [0, migrations.VERSION + 1, "2", None, True])
def test_a_version_this_nmt_does_not_know_is_one_line(tiny_run, tmp_path, version):
    payload = checkpoint.load(tiny_run / "best.pt")
    checkpoint.save(tmp_path / "x.pt", {**payload, "version": version})
    with pytest.raises(NmtError, match=r"x\.pt: checkpoint format version .* not supported"):
        checkpoint.load(tmp_path / "x.pt")


def test_every_version_before_todays_has_a_step():
    assert sorted(migrations.CHECKPOINT_STEPS) == list(range(1, migrations.VERSION))
    assert sorted(migrations.RECIPE_STEPS) == list(range(1, migrations.RECIPE_VERSION))


def test_a_checkpoint_from_before_model_positions_loads_as_sinusoidal(tiny_run, tmp_path):
    """Its recipe has no model.positions (nor data.join, decode.coverage, ...): the keys
    read at their defaults, sinusoidal positions, and it translates as it did."""
    payload = checkpoint.load(tiny_run / "best.pt")
    config = payload["config"]
    old = {**config, "model": {k: v for k, v in config["model"].items() if k != "positions"}}
    old["data"] = {k: v for k, v in config["data"].items() if k != "join"}
    old["decode"] = {
        k: v
        for k, v in config["decode"].items()
        if k not in ("coverage", "word_reward", "min_len_a", "min_len_b")
    }
    checkpoint.save(
        tmp_path / "old.pt",
        {**payload, "version": 1, "config": old, "model": version_1_names(payload["model"])},
    )
    loaded = load_model(tmp_path / "old.pt", torch.device("cpu"))
    assert loaded.cfg.model.positions.kind == "sinusoidal"
    same_outputs(loaded.model, load_model(tiny_run, torch.device("cpu")).model)


def test_a_version_2_checkpoint_of_adam_resumes_with_its_optimiser_state(
    tiny_run, toy_dir, tmp_path
):
    """Version 2 kept Adam's state as Adam's own state dict (and its recipe had no
    version): it becomes the one part of version 3's list, and the run resumes from
    it (without the step, loading the optimiser fails: no list of parts)."""
    from nmt.setup.config import from_dict
    from nmt.setup.recipe import RunConfig
    from nmt.training.run import train
    from tests.conftest import tiny_recipe_dict

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    payload = checkpoint.load(run / "last.pt")
    (adam,) = payload["optimizer"]["parts"]
    config = {k: v for k, v in payload["config"].items() if k != "version"}
    old = {k: v for k, v in payload.items() if k not in ("format", "version")}
    checkpoint.save(run / "last.pt", {**old, "version": 2, "config": config, "optimizer": adam})
    upgraded = checkpoint.load(run / "last.pt")
    assert upgraded["version"] == migrations.VERSION
    assert list(upgraded["optimizer"]) == ["parts"] and len(upgraded["optimizer"]["parts"]) == 1
    step = payload["state"]["step"]
    sections = {"train": {"max_steps": step + 1, "valid_every": step + 1}}
    train(from_dict(RunConfig, tiny_recipe_dict(toy_dir, run, **sections)), "cpu", resume=True)
    assert checkpoint.load(run / "last.pt")["state"]["step"] == step + 1
