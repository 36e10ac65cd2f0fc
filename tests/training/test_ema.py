"""train.ema: an exponential moving average of the weights, which validation scores
and checkpoints hold, leaves training as it was and resumes exactly."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn

from nmt.attention import ATTENTION
from nmt.errors import NmtError
from nmt.export.averaging import average
from nmt.io import checkpoint
from nmt.model.load import load_model
from nmt.setup.config import ConfigError, from_dict
from nmt.setup.training import TrainConfig
from nmt.training.build import build
from nmt.training.ema import WeightAverage
from nmt.training.run import train
from nmt.training.validation import dev_scores
from tests.helpers import StopsAfterUpdate, straight_and_resumed


@pytest.mark.parametrize(("decay", "start"), [(0.5, 0), (0.9, 2), (0.99, 5)])
def test_the_average_is_the_recurrence_over_the_updates(decay, start):
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    ema = WeightAverage(model, decay, start)
    expected = [p.detach().clone() for p in model.parameters()]
    for step in range(1, 8):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        ema.update(step)
        for e, p in zip(expected, model.parameters(), strict=True):
            e.copy_(p if step <= start else decay * e + (1 - decay) * p)
    for e, a in zip(expected, ema.average, strict=True):
        torch.testing.assert_close(a, e)


def test_applied_holds_the_average_and_gives_the_weights_back_bit_for_bit():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(5, 4), nn.Linear(4, 5))
    model[1].weight = model[0].weight  # tied: one average under both names
    ema = WeightAverage(model, 0.9)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
    ema.update(1)
    trained = {k: v.clone() for k, v in model.state_dict().items()}
    with ema.applied():
        inside = {k: v.clone() for k, v in model.state_dict().items()}
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in trained.items())
    averaged = ema.state_dict(model.state_dict())
    assert averaged.keys() == trained.keys() and len(ema.average) == 2
    assert averaged["0.weight"] is averaged["1.weight"]
    for k, v in inside.items():
        assert torch.equal(v, averaged[k]), k
        torch.testing.assert_close(v, trained[k] * (0.1 + 0.9 / 3))


class Recording(StopsAfterUpdate):
    """Keeps the trained weights after every update."""

    def train_step(self, batches):
        out = super().train_step(batches)
        weights = {k: v.clone() for k, v in self.model.state_dict().items()}
        self.trajectory = [*getattr(self, "trajectory", []), weights]
        return out


def ema_config(tiny_config, kind, **train):
    return tiny_config(
        model={"attention": {"kind": kind}}, train={"ema": 0.6, "ema_start": 2, **train}
    )


def logged_valid_loss(run_dir, step):
    records = [json.loads(x) for x in open(f"{run_dir}/metrics.jsonl")]
    return next(r["valid_loss"] for r in records if r["step"] == step and "valid_loss" in r)


# every kind; all but global in the slow tier (a run trains twice for each)
KINDS = [k if k == "global" else pytest.param(k, marks=pytest.mark.slow) for k in ATTENTION.names()]


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
@pytest.mark.parametrize("kind", KINDS)
def test_checkpoints_and_validation_hold_the_average_of_the_trained_weights(tiny_config, kind):
    cfg = ema_config(tiny_config, kind)
    trainer = Recording(*build(cfg, print))
    trainer.run()
    params = dict(trainer.model.named_parameters(remove_duplicate=False))
    expected = dict(trainer.trajectory[0])
    for step, weights in enumerate(trainer.trajectory[1:], start=2):
        for k, v in weights.items():  # buffers are the model's own, not averaged
            keep = 0.6 if step > 2 and k in params else 0.0
            expected[k] = keep * expected[k] + (1 - keep) * v if keep else v
    last = checkpoint.load(f"{cfg.run_dir}/last.pt")
    assert last["model"].keys() == expected.keys()
    for k, v in expected.items():
        torch.testing.assert_close(last["model"][k], v, msg=k)
        assert torch.equal(last["training_weights"][k], trainer.trajectory[-1][k]), k
    # the dev loss logged at the last validation is that of the checkpoint's model
    loaded = load_model(f"{cfg.run_dir}/last.pt", torch.device("cpu"))
    scores = dev_scores(loaded.model, trainer.data, cfg, torch.device("cpu"), False)
    assert scores["valid_loss"] == pytest.approx(logged_valid_loss(cfg.run_dir, 6), rel=1e-5)
    # the average leaves training as it was: the same run without it trains the same
    plain = replace(cfg, run_dir=f"{cfg.run_dir}-plain", train=replace(cfg.train, ema=None))
    train(plain, device="cpu")
    weights = checkpoint.load(f"{plain.run_dir}/last.pt")["model"]
    assert all(torch.equal(weights[k], v) for k, v in last["training_weights"].items())


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
@pytest.mark.parametrize("kind", KINDS)
def test_a_resume_continues_the_weights_and_their_average_exactly(tiny_config, tmp_path, kind):
    whole = ema_config(tiny_config, kind)
    stopped = replace(whole, run_dir=str(tmp_path / "stopped"))
    # stopped after update 4, between two validations
    a, b = straight_and_resumed(whole, stopped, stop_at=4, trainer=Recording)
    for entry in ("model", "training_weights"):
        assert a[entry].keys() == b[entry].keys()
        for k in a[entry]:
            assert torch.equal(a[entry][k], b[entry][k]), (entry, k)
    # an average of the runs' last.pt averages the averages, and carries no trained
    # weights (only a resume reads them)
    both = average([Path(c.run_dir) / "last.pt" for c in (whole, stopped)])
    assert "training_weights" not in both
    assert all(torch.allclose(both["model"][k], a["model"][k]) for k in a["model"])


@pytest.mark.parametrize(
    ("train_cfg", "key"),
    [({"ema": 1.0}, "ema"), ({"ema": 0.0}, "ema"), ({"ema": 0.9, "ema_start": -1}, "ema_start")],
)
def test_absurd_average_settings_name_the_key(train_cfg, key):
    with pytest.raises(ConfigError, match=key):
        from_dict(TrainConfig, {"max_steps": 10, **train_cfg})


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda ck: ck.pop("training_weights"), "no 'training_weights' entry"),
        (lambda ck: ck.update(training_weights=[1, 2]), "damaged (list) 'training_weights'"),
        (
            lambda ck: next(iter(ck["training_weights"].values())).fill_(float("nan")),
            "holds NaN",
        ),
    ],
    ids=["missing", "not a dict", "NaN"],
)
def test_a_damaged_average_run_is_refused_on_resume_naming_the_file(tiny_config, damage, message):
    cfg = ema_config(tiny_config, "global", max_steps=3)
    train(cfg, device="cpu")
    last = Path(cfg.run_dir) / "last.pt"
    ck = checkpoint.load(last)
    damage(ck)
    checkpoint.save(last, ck)
    with pytest.raises(NmtError, match=f"{last}.*{re.escape(message)}"):
        train(replace(cfg, train=replace(cfg.train, max_steps=6)), device="cpu", resume=True)
