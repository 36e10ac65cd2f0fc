"""train.length_curriculum: the competence schedule, the batches each update may take,
a curriculum that starts at full competence trains as none does, and a resume is
exact."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from nmt.io import checkpoint
from nmt.setup.config import ConfigError, from_dict
from nmt.setup.training import LengthCurriculum, TrainConfig
from nmt.training.build import build
from nmt.training.curriculum import LengthLimit, competence, floor, next_group
from nmt.training.run import train
from nmt.training.state import metric_records
from tests.helpers import StopsAfterUpdate, straight_and_resumed


@given(st.floats(0.01, 1.0), st.integers(1, 10_000), st.integers(0, 20_000))
def test_competence_rises_from_start_to_one_at_steps(start, steps, step):
    c = LengthCurriculum(start=start, steps=steps)
    assert competence(c, 0) == pytest.approx(start)
    assert competence(c, steps) == 1.0 and competence(c, steps + step) == 1.0
    assert start - 1e-12 <= competence(c, step) <= competence(c, step + 1) <= 1.0
    if steps > 1 and start < 0.99:  # update `steps` is the first to draw from every pair
        assert competence(c, steps - 1) < 1.0


@given(
    st.lists(st.integers(1, 60), min_size=1, max_size=200),
    st.floats(0.01, 1.0),
    st.integers(0, 2_000),
)
def test_the_limit_admits_the_competent_share_of_pairs_and_no_more(lengths, start, step):
    """The limit is the shortest length whose pairs, and all shorter ones, make up at
    least the competence: no shorter limit would."""
    c = LengthCurriculum(start=start, steps=1_000)
    pairs = np.array([[n, max(1, n - 3)] for n in lengths])
    limit, share = LengthLimit(c, pairs).at(step), competence(c, step)
    if share == 1.0:
        assert math.isinf(limit)
        return
    admitted = np.mean(pairs.max(1) <= limit)
    assert admitted >= share - 1e-12
    assert limit == min(n for n in lengths if np.mean(pairs.max(1) <= n) >= share - 1e-12)


@given(
    st.lists(st.integers(1, 50), min_size=0, max_size=60),
    st.integers(0, 70),
    st.integers(1, 8),
    st.integers(1, 3),
    st.integers(0, 60),
)
def test_a_group_is_the_next_batches_within_the_limit_for_every_rank(
    longest, start, per_rank, world, limit
):
    longest = np.array(longest[: len(longest) - len(longest) % world], dtype=np.int64)
    count = per_rank * world
    start = min(start, len(longest))
    group = next_group(longest, start, count, world, limit)
    bound = max(limit, floor(longest, world))
    eligible = [i for i in range(start, len(longest)) if longest[i] <= bound]
    assert len(group) % world == 0 and len(group) <= count
    assert list(group) == eligible[: len(group)]  # the first ones, none passed over
    assert len(group) == min(count, len(eligible) - len(eligible) % world)
    if len(longest) >= world:  # a plan from its start always has a group
        assert len(next_group(longest, 0, count, world, limit)) >= world


class Recording(StopsAfterUpdate):
    """Notes each update's step, the longest pair of its batches (a batch's tensors:
    its longest side, padded) and the shortest batch of its epoch's plan."""

    def train_step(self, batches):
        longest = max(int(max(b.src.shape[1], b.tgt_in.shape[1])) for b in batches)
        pairs = self.epochs.pairs
        shortest = min(int(pairs.lengths[b].max()) for b in self.epochs.plan(self.state.epoch))
        self.seen = [*getattr(self, "seen", []), (self.state.step, longest, shortest)]
        return super().train_step(batches)


def curriculum(tiny_config, **options):
    return tiny_config(
        model={"dropout": 0.0},
        train={"max_steps": 12, "length_curriculum": {"start": 0.1, "steps": 10, **options}},
    )


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_every_update_takes_batches_within_its_limit_and_all_lengths_come_in(tiny_config):
    trainer = Recording(*build(curriculum(tiny_config), print))
    trainer.run()
    limit = LengthLimit(trainer.cfg.train.length_curriculum, trainer.epochs.data.train.lengths)
    everything = int(trainer.epochs.data.train.lengths.max())
    for step, longest, shortest in trainer.seen:  # within the limit, or the plan's floor
        assert longest <= max(limit.at(step + 1), shortest), (step, longest, shortest)
    assert trainer.seen[0][1] < everything / 2  # the first update: short pairs only
    assert max(longest for _, longest, _ in trainer.seen) > everything / 2  # then long ones
    s = trainer.state  # the plan's long batches were passed over: more than one an update
    assert s.epoch >= 1 or s.batch_in_epoch > s.step, s


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_joined_examples_are_measured_as_joined_and_drawn_before_full_competence(tiny_config):
    """Under data.join the limits come from the epoch's joined examples: those longer
    than any single pair are drawn once their share is reached, not only at
    competence 1 (and the log's competence is that of the update it ends with)."""
    cfg = tiny_config(
        data={"join": {"prob": 0.5, "max_k": 3}},
        train={
            "max_steps": 30,
            "valid_every": 30,
            "log_every": 5,
            "length_curriculum": {"start": 0.97, "steps": 1_000},
        },
    )
    trainer = Recording(*build(cfg, print))
    trainer.run()
    single = int(trainer.data.train.lengths.max())
    joined = trainer.epochs.pairs.lengths.max(1)
    assert joined.max() > single  # the plan holds joined examples longer than any pair
    assert any(longest > single for _, longest, _ in trainer.seen)  # ... and draws some
    records = [r for r in metric_records(trainer.run_dir / "metrics.jsonl") if "competence" in r]
    c = cfg.train.length_curriculum
    assert records and all(r["competence"] == competence(c, r["step"]) for r in records)


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_a_curriculum_at_full_competence_trains_as_none(tiny_config, tmp_path):
    plain = tiny_config(model={"dropout": 0.0}, train={"max_steps": 5})
    full = replace(curriculum(tiny_config, start=1.0), run_dir=str(tmp_path / "full"))
    full = replace(full, train=replace(full.train, max_steps=5))
    for cfg in (plain, full):
        train(cfg, device="cpu")
    a, b = (checkpoint.load(f"{c.run_dir}/last.pt") for c in (plain, full))
    assert a["state"] | {"elapsed": 0} == b["state"] | {"elapsed": 0}
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_a_resume_in_the_curriculum_is_exact(tiny_config, tmp_path):
    whole = curriculum(tiny_config)
    stopped = replace(whole, run_dir=str(tmp_path / "stopped"))
    a, b = straight_and_resumed(whole, stopped, stop_at=4)  # mid-curriculum, mid-epoch
    assert a["state"] == b["state"] | {"elapsed": a["state"]["elapsed"]}
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k


@pytest.mark.parametrize(
    "train, key",
    [
        ({"length_curriculum": {"start": 0}}, "start"),
        ({"length_curriculum": {"start": 1.5}}, "start"),
        ({"length_curriculum": {"steps": 0}}, "steps"),
        ({"length_curriculum": {"speed": 2}}, "speed"),
        ({"length_curriculum": {}, "batching": "random"}, "length_curriculum"),
    ],
)
def test_a_curriculum_that_cannot_be_followed_names_the_key(train, key):
    with pytest.raises(ConfigError, match=key):
        from_dict(TrainConfig, {"max_steps": 10, **train})
