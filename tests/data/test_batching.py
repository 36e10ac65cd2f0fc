from __future__ import annotations

import itertools
import random

import pytest

from nmt.data.batching import ParallelData, bucket, cut
from nmt.data.vocab import BOS, EOS, PAD


@pytest.fixture
def data() -> ParallelData:
    rng = random.Random(0)
    # Target lengths follow source lengths, as in real parallel text.
    src = [[rng.randrange(4, 50) for _ in range(rng.randint(1, 60))] for _ in range(500)]
    tgt = [[rng.randrange(4, 50) for _ in range(max(1, len(s) + rng.randint(-3, 3)))] for s in src]
    return ParallelData(src, tgt)


@pytest.mark.parametrize("bucketed", [True, False])
@pytest.mark.parametrize("budget", [64, 300, 4096])
def test_no_pair_lost_and_budget_respected(data, budget, bucketed):
    batches = data.epoch_batches(budget, seed=1, epoch=0, bucketed=bucketed)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(len(data)))
    for b in batches:
        longest = max(max(data.lengths[i]) for i in b)
        assert len(b) == 1 or len(b) * longest <= budget


@pytest.mark.parametrize("bucketed", [True, False])
def test_epoch_plans_are_deterministic_and_vary(data, bucketed):
    a = data.epoch_batches(500, seed=1, epoch=0, bucketed=bucketed)
    assert a == data.epoch_batches(500, seed=1, epoch=0, bucketed=bucketed)
    assert a != data.epoch_batches(500, seed=1, epoch=1, bucketed=bucketed)


def test_random_batches_mix_lengths_and_follow_one_shuffle(data):
    """Unbucketed batches are consecutive runs of one permutation of the pairs, each
    as long as the budget allows: so their lengths vary as much as the corpus's."""
    batches = data.epoch_batches(2000, seed=1, epoch=0, bucketed=False)
    order = [i for b in batches for i in b]
    for b, following in itertools.pairwise(batches):
        longest = max(max(data.lengths[i]) for i in [*b, following[0]])
        assert (len(b) + 1) * longest > 2000  # the next pair would not have fitted
    spread = [
        max(data.lengths[i][0] for i in b) - min(data.lengths[i][0] for i in b) for b in batches
    ]
    assert sorted(order) == list(range(len(data))) and min(spread) > 20
    bucketed = data.epoch_batches(2000, seed=1, epoch=0)
    assert data.padding_fraction(batches) > 2 * data.padding_fraction(bucketed)


def test_bucketing_keeps_padding_low(data):
    bucketed = data.epoch_batches(2000, seed=1, epoch=0)
    rng = random.Random(0)
    order = list(range(len(data)))
    rng.shuffle(order)
    size = round(len(order) / len(bucketed))
    unsorted = [order[i : i + size] for i in range(0, len(order), size)]
    assert data.padding_fraction(bucketed) < 0.5 * data.padding_fraction(unsorted)


def test_collate_shapes_and_specials(data):
    batch = data.collate([0, 1, 2])
    assert batch.src.shape[0] == 3 and batch.tgt_in.shape == batch.tgt_out.shape
    assert (batch.tgt_in[:, 0] == BOS).all()
    for row, i in enumerate([0, 1, 2]):
        n = len(data.tgt[i])
        assert batch.tgt_out[row, n] == EOS and batch.src[row, len(data.src[i])] == EOS
        assert (batch.tgt_out[row, n + 1 :] == PAD).all()
        assert batch.tgt_tokens >= n + 1


def test_oversize_pair_gets_its_own_batch():
    assert bucket([(10, 10), (3, 3), (3, 3)], batch_tokens=6) == [[1, 2], [0]]


def test_buckets_follow_the_longer_side_then_the_target(data):
    """Pairs are cut in order of (longer side, target, source) length, so a batch's
    targets, which carry most of a step's work, are nearly of one length."""
    order = [i for b in bucket(data.lengths, 2000) for i in b]
    keys = [(max(data.lengths[i]), data.lengths[i][1], data.lengths[i][0]) for i in order]
    assert keys == sorted(keys)
    by_source = cut(sorted(range(len(data)), key=lambda i: data.lengths[i]), data.lengths, 2000)

    def padded_targets(batches: list[list[int]]) -> int:
        return sum(len(b) * max(data.lengths[i][1] for i in b) for b in batches)

    assert padded_targets(bucket(data.lengths, 2000)) < padded_targets(by_source)
