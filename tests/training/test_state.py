"""A run's budget, its progress bar's expected end, and the choice of the best step."""

import pytest

from nmt.setup.training import TrainConfig
from nmt.training.state import RunState, budget_spent, expected_steps, spent_budget, stop_message


@pytest.mark.parametrize(
    "budget, state, key",
    [
        ({"max_steps": 10}, RunState(step=9), None),
        ({"max_steps": 10}, RunState(step=10), "train.max_steps"),
        ({"max_steps": None, "max_epochs": 2}, RunState(step=10**6, epoch=1), None),
        ({"max_steps": None, "max_epochs": 2}, RunState(epoch=2), "train.max_epochs"),
        ({"max_steps": 10, "max_minutes": 1}, RunState(step=3, elapsed=60.0), "train.max_minutes"),
    ],
)
def test_the_first_budget_spent_ends_the_run_and_is_named(budget, state, key):
    t = TrainConfig(**budget)
    assert budget_spent(t, state) is (key is not None)
    assert spent_budget(t, state) == key


@pytest.mark.parametrize(
    "budget, state, reason, words",
    [
        (
            {"max_steps": 200, "max_minutes": 6},
            RunState(step=198, elapsed=361.0),
            "train.max_minutes",
            "stopped at update 198 of train.max_steps 200: train.max_minutes (6) is spent, "
            "0:06:01 of training and validation",
        ),
        (
            {"max_steps": 200, "max_epochs": 1},
            RunState(step=57, epoch=1),
            "train.max_epochs",
            "stopped at update 57 of train.max_steps 200: train.max_epochs (1) is spent",
        ),
        (
            {"max_steps": 2000, "patience": 3},
            RunState(step=1200),
            "early stopping",
            "stopped at update 1,200 of train.max_steps 2,000: early stopping: "
            "train.patience (3) validations without a better dev BLEU",
        ),
        ({"max_steps": 200}, RunState(step=200), "train.max_steps", None),
        ({"max_steps": None, "max_epochs": 1}, RunState(step=9, epoch=1), "train.max_epochs", None),
    ],
)
def test_a_run_that_ends_before_its_max_steps_says_which_key_ended_it(budget, state, reason, words):
    assert stop_message(TrainConfig(**budget), state, reason) == words


def test_expected_steps_is_the_nearest_bound_and_a_time_budget_goes_at_the_pace_so_far():
    t = TrainConfig(max_steps=1000, max_epochs=3, accumulate=2)
    assert expected_steps(t, RunState(), batches_per_epoch=100, world=1) == 150
    assert expected_steps(t, RunState(), batches_per_epoch=100, world=2) == 75
    timed = TrainConfig(max_steps=None, max_minutes=10)
    assert expected_steps(timed, RunState(), 100, 1) is None  # no pace yet
    # 20 steps in 60 s: 540 s left is 180 steps more
    assert expected_steps(timed, RunState(step=20, elapsed=60.0), 100, 1) == 200
    over = RunState(step=20, elapsed=900.0)  # past the budget: no steps left
    assert expected_steps(timed, over, 100, 1) == 20


@pytest.mark.parametrize("by, better, worse", [("bleu", 30.0, 20.0), ("loss", 2.0, 3.0)])
def test_the_best_validation_is_the_higher_bleu_or_the_lower_loss(by, better, worse):
    key = "valid_bleu" if by == "bleu" else "valid_loss"
    s = RunState(step=100)
    assert s.improved({key: worse}, by)
    s.step = 200
    assert s.improved({key: better}, by) and (s.best_step, s.bad_evals) == (200, 0)
    s.step = 300
    assert not s.improved({key: worse}, by) and not s.improved({key: better}, by)
    assert (s.best_step, s.bad_evals) == (200, 2)  # a tie is not an improvement
