"""train.optimizer: Adam, or Muon for the layers' weight matrices beside Adam for the
rest; each group follows the schedule from its own peak; a resume is exact."""

from __future__ import annotations

import pytest
import torch

from nmt.setup.config import ConfigError, from_dict
from nmt.setup.recipe import RunConfig
from nmt.setup.training import TrainConfig
from nmt.training.optimizers import matrices
from nmt.training.run import prepare
from tests.conftest import tiny_recipe_dict
from tests.helpers import straight_and_resumed


def test_muon_takes_the_layers_matrices_and_adam_the_rest(tiny_config):
    trainer = prepare(tiny_config(train={"optimizer": "muon", "muon_lr": 0.02}), "cpu")
    model, (muon, adam) = trainer.model, trainer.optimizer.parts
    assert isinstance(muon, torch.optim.Muon) and isinstance(adam, torch.optim.Adam)
    ortho = {id(p) for g in muon.param_groups for p in g["params"]}
    rest = {id(p) for g in adam.param_groups for p in g["params"]}
    assert not ortho & rest and ortho | rest == {id(p) for p in model.parameters()}
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(names[i].endswith("weight") for i in ortho)
    assert id(model.output.weight) in rest and id(model.tgt_embed.tokens.weight) in rest
    assert all(model.state_dict()[names[i]].dim() == 2 for i in ortho)
    assert {names[i] for i in ortho} == {names[id(p)] for p in matrices(model)}
    assert [g["lr"] for g in trainer.optimizer.param_groups] == [0.02, trainer.cfg.train.lr]


@pytest.mark.slow
def test_muon_trains_and_resumes_exactly(toy_dir, tmp_path):
    muon = {"optimizer": "muon", "lr_schedule": "cosine", "warmup": 2, "max_steps": 6}

    def config(run):
        train_cfg = {**muon, "valid_every": 3, "max_epochs": None}
        return from_dict(RunConfig, tiny_recipe_dict(toy_dir, tmp_path / run, train=train_cfg))

    a, b = straight_and_resumed(config("whole"), config("stopped"), stop_at=4)
    assert a["state"]["step"] == 6
    assert len(a["optimizer"]["parts"]) == 2  # Muon's state, then Adam's
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k


@pytest.mark.parametrize(
    ("train", "key"),
    [
        ({"optimizer": "muon", "muon_lr": 0.0}, "muon_lr"),
        ({"optimizer": "muon", "muon_momentum": 1.0}, "muon_momentum"),
        ({"optimizer": "sgd"}, "optimizer"),
    ],
)
def test_absurd_optimizer_settings_name_the_key(train, key):
    with pytest.raises(ConfigError, match=key):
        from_dict(TrainConfig, {"max_steps": 10, **train})
