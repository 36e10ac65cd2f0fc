"""The learning-rate schedules: the warm-up they share, inverse_sqrt's values, and
the decaying schedules' shape (monotone, half the peak half-way, zero at the end)."""

from __future__ import annotations

import itertools
import math

import pytest

from nmt.setup.config import ConfigError
from nmt.setup.training import TrainConfig
from nmt.training.lr_schedule import SCHEDULES, inverse_sqrt
from nmt.training.run import prepare


def test_inverse_sqrt_schedule():
    assert inverse_sqrt(50, 1e-3, 100) == pytest.approx(5e-4)
    assert inverse_sqrt(100, 1e-3, 100) == pytest.approx(1e-3)
    assert inverse_sqrt(400, 1e-3, 100) == pytest.approx(5e-4)
    assert inverse_sqrt(4, 1e-3, 0) == pytest.approx(5e-4)  # no warm-up: peak/sqrt(step)
    assert inverse_sqrt(0, 1e-3, 0) == pytest.approx(1e-3)  # step 0 counts as step 1


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_every_schedule_warms_up_linearly_to_the_peak(name):
    schedule = SCHEDULES[name]
    assert [schedule(s, 2e-3, 100, 1000) for s in (25, 50, 100)] == pytest.approx(
        [5e-4, 1e-3, 2e-3]
    )


@pytest.mark.parametrize("name", ["cosine", "linear"])
@pytest.mark.parametrize("warmup", [0, 100])
def test_a_decaying_schedule_falls_to_zero_just_after_its_budget(name, warmup):
    """The decay spans the budget's updates and one more: every update of the
    budget moves the parameters (the last at the smallest rate), and the rate is 0
    from update max_steps + 1 on."""
    schedule, total = SCHEDULES[name], 1099
    rates = [schedule(s, 1e-3, warmup, total) for s in range(warmup + 1, total + 1)]
    assert all(a > b for a, b in itertools.pairwise(rates))  # falls at every update
    assert rates[-1] > 0
    assert schedule(total + 1, 1e-3, warmup, total) == pytest.approx(0.0, abs=1e-12)
    assert schedule(total + 50, 1e-3, warmup, total) == pytest.approx(0.0, abs=1e-12)
    middle = warmup + (total + 1 - warmup) // 2  # (total + 1 − warmup) is even
    assert schedule(middle, 1e-3, warmup, total) == pytest.approx(5e-4)  # both: half-way
    quarter = warmup + (total + 1 - warmup) // 4  # cosine stays higher early, linear does not
    want = {"cosine": 1e-3 * (0.5 + 0.5 * 0.5**0.5), "linear": 7.5e-4}[name]
    assert schedule(quarter, 1e-3, warmup, total) == pytest.approx(want)


def test_a_decaying_schedule_needs_a_step_budget():
    with pytest.raises(ConfigError, match=r"lr_schedule.*max_steps"):
        TrainConfig(lr_schedule="cosine", max_epochs=5)
    with pytest.raises(ConfigError, match="warmup"):
        TrainConfig(lr_schedule="linear", max_steps=500, warmup=500)
    for warmup in (0, 799):  # accepted: a warm-up below the budget (a refusal would raise)
        TrainConfig(lr_schedule="cosine", max_steps=800, warmup=warmup)


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_an_update_takes_the_recipes_schedule(tiny_config, name):
    """The trainer applies train.lr_schedule at update step + 1, with the budget."""
    train = {"lr": 1.0, "warmup": 4, "lr_schedule": name, "max_steps": 20, "max_epochs": None}
    trainer = prepare(tiny_config(train=train), "cpu")
    trainer.state.step = 11
    batch = trainer.data.train.collate(trainer.data.train.epoch_batches(512, 0, 0)[0])
    _, logged = trainer.train_step([batch])
    assert logged["lr"] == SCHEDULES[name](12, 1.0, 4, 20)
    done = 8 / 17  # 8 of the 17 decaying updates (5..20 and one more)
    assert logged["lr"] == pytest.approx(
        {
            "inverse_sqrt": 3**-0.5,
            "cosine": 0.5 * (1 + math.cos(math.pi * done)),
            "linear": 1 - done,
        }[name]
    )
