from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
import torch

from nmt.data.batching import ParallelData, bucket, keep_pairs, split_batches
from nmt.data.vocab import BOS, EOS, PAD


@pytest.fixture
def data() -> ParallelData:
    rng = random.Random(0)
    # Target lengths follow source lengths, as in real parallel text.
    src = [[rng.randrange(4, 50) for _ in range(rng.randint(1, 60))] for _ in range(500)]
    tgt = [[rng.randrange(4, 50) for _ in range(max(1, len(s) + rng.randint(-3, 3)))] for s in src]
    return ParallelData.from_lists(src, tgt)


def reference_bucket(lengths, batch_tokens, generator):
    """The list-based bucketing the numpy one replaced (nmt before the data cache):
    the batches of every earlier result, which the cache must reproduce exactly."""
    n = len(lengths)
    noise = torch.rand(n, generator=generator).tolist()
    order = sorted(range(n), key=lambda i: (max(lengths[i]), *lengths[i][::-1], noise[i]))
    return reference_cut(order, lengths, batch_tokens)


def reference_cut(order, lengths, batch_tokens):
    batches, current, longest = [], [], 0
    for i in order:
        size = max(lengths[i])
        if current and (len(current) + 1) * max(longest, size) > batch_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, size)
    return [*batches, current] if current else batches


@pytest.mark.parametrize("bucketed", [True, False])
@pytest.mark.parametrize("budget", [64, 300, 4096])
def test_epoch_plans_equal_the_earlier_list_based_ones(data, budget, bucketed):
    lengths = [tuple(pair) for pair in data.lengths.tolist()]
    for seed, epoch in [(1, 0), (1, 1), (7, 3)]:
        g = torch.Generator().manual_seed(seed * 100_003 + epoch)
        if bucketed:
            batches = reference_bucket(lengths, budget, g)
            want = [batches[i] for i in torch.randperm(len(batches), generator=g).tolist()]
        else:
            want = reference_cut(
                torch.randperm(len(lengths), generator=g).tolist(), lengths, budget
            )
        got = data.epoch_batches(budget, seed, epoch, bucketed)
        assert [b.tolist() for b in got] == want


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
    def plan(epoch):
        return [b.tolist() for b in data.epoch_batches(500, 1, epoch, bucketed=bucketed)]

    assert plan(0) == plan(0) and plan(0) != plan(1)


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
    assert [b.tolist() for b in bucket([(10, 10), (3, 3), (3, 3)], batch_tokens=6)] == [[1, 2], [0]]


def test_buckets_follow_the_longer_side_then_the_target(data):
    """Pairs are cut in order of (longer side, target, source) length, so a batch's
    targets, which carry most of a step's work, are nearly of one length."""
    lengths = data.lengths.tolist()
    order = [i for b in bucket(data.lengths, 2000) for i in b]
    keys = [(max(lengths[i]), lengths[i][1], lengths[i][0]) for i in order]
    assert keys == sorted(keys)
    by_source = split_batches(np.lexsort(data.lengths.T[::-1]), data.lengths.max(1), 2000)

    def padded_targets(batches: list[list[int]]) -> int:
        return sum(len(b) * max(lengths[i][1] for i in b) for b in batches)

    assert padded_targets(bucket(data.lengths, 2000)) < padded_targets(by_source)


def test_training_keeps_pairs_with_both_sides_and_none_over_max_len():
    """Dropped as empty: a side with no piece; as over-long: a side over max_len (a
    side of exactly max_len stays)."""
    src = [[4], [], [4, 5], [4, 5, 6], [4]]
    tgt = [[5], [6], [7, 8], [7], []]
    assert keep_pairs(src, tgt, max_len=2) == ([0, 2], 2, 1)


def test_padding_fraction_counts_the_padded_slots_of_both_sides():
    """Lengths count BOS/EOS (+1): pairs (2, 1) and (4, 3) pieces are (3, 2) and (5, 4)
    slots; one batch of both pads to 2·(5 + 4) = 18 slots, 14 of them real."""
    data = ParallelData.from_lists([[4, 5], [4, 5, 6, 7]], [[4], [4, 5, 6]])
    assert data.padding_fraction([np.array([0, 1])]) == pytest.approx(1 - 14 / 18)
    assert data.padding_fraction([np.array([0]), np.array([1])]) == 0.0
