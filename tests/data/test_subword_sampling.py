"""Subword regularisation: a fresh, reproducible segmentation of the same pairs."""

from __future__ import annotations

from nmt.data.batching import ParallelData
from nmt.data.config import SubwordSampling
from nmt.data.corpus import read_lines
from nmt.data.subword_sampling import resampled
from nmt.data.vocab import Vocab


def setup(toy_dir, size=200):
    src, tgt = read_lines(toy_dir / "train.src")[:200], read_lines(toy_dir / "train.tgt")[:200]
    vocab = Vocab.train(src + tgt, size, "unigram")
    return vocab, ParallelData.from_lists(vocab.encode(src), vocab.encode(tgt)), src, tgt


def sides(data):
    return [
        [data.src[i].tolist() for i in range(len(data))],
        [data.tgt[i].tolist() for i in range(len(data))],
    ]


def test_each_epoch_segments_the_same_text_anew_and_reproducibly(toy_dir):
    vocab, data, src, tgt = setup(toy_dir)
    cfg = SubwordSampling(alpha=0.2, nbest_size=-1)
    one = resampled(data, vocab, vocab, cfg, seed=1, epoch=0, max_len=100)
    assert sides(one) == sides(resampled(data, vocab, vocab, cfg, seed=1, epoch=0, max_len=100))
    other = resampled(data, vocab, vocab, cfg, seed=1, epoch=1, max_len=100)
    assert sides(other) != sides(one) != sides(data)
    for epoch in (one, other):  # the same sentences, segmented differently
        assert vocab.decode(sides(epoch)[0]) == src and vocab.decode(sides(epoch)[1]) == tgt


def test_a_pair_sampled_over_max_len_keeps_its_deterministic_pieces(toy_dir):
    vocab, data, _, _ = setup(toy_dir)
    longest = int(max(data.lengths.max(0))) - 1  # pieces, without EOS/BOS
    cfg = SubwordSampling(alpha=1.0, nbest_size=-1)  # many short pieces: longer sequences
    out = resampled(data, vocab, vocab, cfg, seed=1, epoch=0, max_len=longest)
    assert int(out.lengths.max()) - 1 <= longest and len(out) == len(data)
