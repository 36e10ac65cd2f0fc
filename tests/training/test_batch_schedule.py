"""train.accumulate_schedule: the batches of each update follow the schedule, the
progress bar counts updates under it, and a resume across a change is exact."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
import torch

from nmt.setup.config import ConfigError, from_dict
from nmt.setup.training import TrainConfig
from nmt.training.build import build
from nmt.training.state import accumulation, batches_for, updates_for
from tests.helpers import StopsAfterUpdate, straight_and_resumed


def simulated_updates(t: TrainConfig, batches: int, world: int) -> int:
    """Updates until ``batches`` are taken, one update at a time."""
    step = 0
    while batches > 0:
        batches -= accumulation(t, step) * world
        step += 1
    return step


def test_updates_and_batches_count_what_one_update_at_a_time_takes():
    rng = random.Random(0)
    for _ in range(300):
        starts = sorted(rng.sample(range(1, 40), rng.randint(0, 3)))
        pairs = tuple((u, rng.randint(1, 5)) for u in starts)
        t = TrainConfig(max_steps=10, accumulate=rng.randint(1, 3), accumulate_schedule=pairs)
        batches, world = rng.randint(1, 200), rng.randint(1, 3)
        assert updates_for(t, batches, world) == simulated_updates(t, batches, world), t
        # the batches of n updates (an ETA's work): n updates hold them, n - 1 not
        n = updates_for(t, batches, 1)
        assert batches_for(t, n - 1) < batches <= batches_for(t, n), t


class Counting(StopsAfterUpdate):
    """Notes the batches of each update."""

    def train_step(self, batches):
        self.sizes = [*getattr(self, "sizes", []), len(batches)]
        return super().train_step(batches)


def scheduled(tiny_config, **train):
    return tiny_config(train={"max_steps": 6, "accumulate_schedule": [[2, 3], [4, 2]], **train})


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_each_update_takes_the_batches_of_its_schedule(tiny_config):
    trainer = Counting(*build(scheduled(tiny_config), print))
    trainer.run()
    assert trainer.sizes == [1, 1, 3, 3, 2, 2]
    assert trainer.state.batch_in_epoch == 12  # one epoch of the toy corpus holds more


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_a_resume_across_a_change_of_batches_is_exact(tiny_config, tmp_path):
    whole = scheduled(tiny_config)
    stopped = replace(whole, run_dir=str(tmp_path / "stopped"))
    # stopped after update 2, the last one before the first change
    a, b = straight_and_resumed(whole, stopped, stop_at=2, trainer=Counting)
    assert a["state"] == b["state"] | {"elapsed": a["state"]["elapsed"]}
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k


@pytest.mark.parametrize(
    "schedule",
    [[[0, 2]], [[3, 0]], [[3, 2], [3, 4]], [[5, 2], [3, 4]], [[3]], [[3, 70_000]]],
)
def test_a_schedule_that_cannot_be_followed_names_the_key(schedule):
    with pytest.raises(ConfigError, match="accumulate_schedule"):
        from_dict(TrainConfig, {"max_steps": 10, "accumulate_schedule": schedule})
