"""data.join: an epoch's examples, some of them pairs joined on both sides."""

from __future__ import annotations

import numpy as np
import pytest

from nmt.data.batching import ParallelData
from nmt.data.joining import groups, joined
from nmt.setup.config import ConfigError, from_dict
from nmt.setup.data import DataConfig, JoinConfig
from nmt.setup.recipe import RunConfig
from nmt.training.run import prepare
from tests.conftest import tiny_recipe_dict


def corpus(n: int = 400, seed: int = 0) -> tuple[ParallelData, list, list]:
    rng = np.random.default_rng(seed)
    src = [list(rng.integers(4, 90, rng.integers(1, 12))) for _ in range(n)]
    tgt = [list(rng.integers(4, 90, rng.integers(1, 12))) for _ in range(n)]
    return ParallelData.from_lists(src, tgt), src, tgt


@pytest.mark.parametrize("order", ["consecutive", "random"])
def test_joined_examples_keep_both_sides_aligned_and_in_order(order):
    data, src, tgt = corpus()
    cfg = JoinConfig(prob=0.5, max_k=4, order=order)
    members, starts = groups(data.lengths - 1, cfg, 30, seed=3, epoch=2)
    epoch = joined(data, cfg, 30, seed=3, epoch=2)
    assert sorted(members.tolist()) == list(range(len(src)))  # each pair once
    sizes = np.diff(starts)
    assert sizes.min() >= 1 and sizes.max() <= 4
    for e in range(len(epoch)):
        group = members[starts[e] : starts[e + 1]].tolist()
        assert epoch.src[e].tolist() == [t for i in group for t in src[i]]
        assert epoch.tgt[e].tolist() == [t for i in group for t in tgt[i]]
        assert max(len(epoch.src[e]), len(epoch.tgt[e])) <= 30 or len(group) == 1
        if order == "consecutive":
            assert group == list(range(group[0], group[0] + len(group)))
    np.testing.assert_array_equal(
        epoch.lengths,
        np.stack([[len(epoch.src[e]) + 1, len(epoch.tgt[e]) + 1] for e in range(len(epoch))]),
    )
    batch = epoch.collate([0, 1, 2])
    assert batch.src.shape[0] == 3


@pytest.mark.parametrize("order", ["consecutive", "random"])
def test_a_sentence_group_models_examples_have_a_separator_between_sentences(order):
    """Its sentences end to end with the side's separator between each two, within
    max_len with the separators counted, and lengths that say so."""
    data, src, tgt = corpus()
    cfg = JoinConfig(prob=0.6, max_k=4, order=order)
    epoch = joined(data, cfg, 30, seed=3, epoch=2, separators=(98, 99))
    members, starts = epoch.src.members, epoch.src.starts
    assert sorted(members.tolist()) == list(range(len(src)))
    assert np.diff(starts).max() > 1  # some joined
    for e in range(len(epoch)):
        group = members[starts[e] : starts[e + 1]].tolist()
        for side, lines, sep in ((epoch.src, src, 98), (epoch.tgt, tgt, 99)):
            want = [t for n, i in enumerate(group) for t in [sep] * (n > 0) + lines[i]]
            assert side[e].tolist() == want
            assert len(want) <= 30 or len(group) == 1
    np.testing.assert_array_equal(
        epoch.lengths,
        np.stack([[len(epoch.src[e]) + 1, len(epoch.tgt[e]) + 1] for e in range(len(epoch))]),
    )


def test_the_share_joined_follows_prob_and_is_redrawn_each_epoch():
    data, _, _ = corpus(4000)
    lengths = data.lengths - 1
    cfg = JoinConfig(prob=0.3, max_k=3)
    _, starts = groups(lengths, cfg, 1000, seed=1, epoch=0)
    sizes = np.diff(starts)
    assert (sizes > 1).mean() == pytest.approx(0.3, abs=0.03)
    assert set(sizes.tolist()) == {1, 2, 3}
    again = groups(lengths, cfg, 1000, seed=1, epoch=0)
    np.testing.assert_array_equal(again[1], starts)  # a pure function of (seed, epoch)
    other = groups(lengths, cfg, 1000, seed=1, epoch=1)
    assert not np.array_equal(other[1], starts)
    assert np.diff(groups(lengths, JoinConfig(prob=0.0), 1000, 1, 0)[1]).max() == 1


def test_the_batch_budget_holds_for_joined_examples():
    data, _, _ = corpus(2000)
    epoch = joined(data, JoinConfig(prob=0.8, max_k=5), 40, seed=1, epoch=0)
    for batch in epoch.epoch_batches(256, seed=1, epoch=0):
        longest = epoch.lengths[batch].max()
        assert len(batch) == 1 or len(batch) * longest <= 256


@pytest.mark.parametrize(
    ("join", "key"),
    [
        ({"prob": 1.5}, "join.prob"),
        ({"prob": -0.1}, "join.prob"),
        ({"prob": 0.5, "max_k": 1}, "join.max_k"),
        ({"prob": 0.5, "max_k": 10**6}, "join.max_k"),
        ({"prob": 0.5, "order": "shuffled"}, "join.order"),
        ({"max_k": 3}, "join.max_k"),  # does nothing with prob 0
    ],
)
def test_absurd_join_settings_are_refused_naming_the_key(join, key):
    with pytest.raises(ConfigError) as error:
        from_dict(DataConfig, {"dir": ".", "src_lang": "a", "tgt_lang": "b", "join": join})
    assert key in str(error.value)


def test_joined_pairs_and_guided_alignment_are_refused_together(toy_dir, tmp_path):
    recipe = tiny_recipe_dict(
        toy_dir, tmp_path, data={"join": {"prob": 0.5}}, train={"alignment": {}}
    )
    with pytest.raises(ConfigError, match=r"data\.join\.prob"):
        from_dict(RunConfig, recipe)


def test_training_plans_an_epoch_of_joined_examples(tiny_config):
    trainer = prepare(tiny_config(data={"join": {"prob": 0.5, "max_k": 3}}), "cpu")
    plan = trainer.epochs.plan(0)
    examples = trainer.epochs.pairs
    assert len(examples) < len(trainer.data.train)
    assert sum(map(len, plan)) <= len(examples)
    assert trainer.train_step([examples.collate(plan[0])]) is not None
