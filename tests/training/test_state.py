"""A run's budget, its progress bar's expected end, and the choice of the best step."""

import pytest

from nmt.training.config import TrainConfig
from nmt.training.state import RunState, budget_spent, expected_steps


@pytest.mark.parametrize(
    "budget, state, spent",
    [
        ({"max_steps": 10}, RunState(step=9), False),
        ({"max_steps": 10}, RunState(step=10), True),
        ({"max_steps": None, "max_epochs": 2}, RunState(step=10**6, epoch=1), False),
        ({"max_steps": None, "max_epochs": 2}, RunState(epoch=2), True),
        ({"max_steps": 10, "max_minutes": 1}, RunState(step=3, elapsed=60.0), True),
    ],
)
def test_the_first_budget_spent_ends_the_run(budget, state, spent):
    assert budget_spent(TrainConfig(**budget), state) is spent


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
