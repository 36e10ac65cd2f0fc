"""Each diagnostic computed by hand on a tiny example, and the word accuracy by
frequency against compare-mt's own code on a random corpus."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from nmt.data.alignment import word_ids
from nmt.inspection import diagnostics as d
from nmt.inspection.maps import AttentionMap
from tests.conftest import require_extra


def amap(src: list[str], weights: np.ndarray) -> AttentionMap:
    """One layer, two heads that agree: (T,S) weights with </s> on both sides."""
    w = np.stack([weights, weights])[None]  # (1,2,T,S)
    return AttentionMap(src, ["x"] * weights.shape[0], w, None)


def test_repetition_is_seq_rep_2_averaged_over_sentences():
    """Welleck et al. 2020's seq-rep-2, 1 − unique bigrams / bigrams, per sentence and
    then averaged over sentences (not pooled over the split as a ratio of sums)."""
    # bigrams: (a,b) (b,a) (a,b) (b,a) (a,c): 3 unique of 5
    assert d.repetition("a b a b a c") == (pytest.approx(0.4), 1)
    assert d.repetition("a man rides a horse") == (0, 1)  # a repeated word is no repeated bigram
    assert d.repetition("one") == (0, 0)  # no bigram: left out of the mean
    hand = ["a b a b a c", "x y z", "one", "the dog the dog the dog"]
    # per sentence: 2/5, 0/2, (none), 1 − 2/5: the mean of the three is 0.4
    assert d.ratio(np.array([d.repetition(h) for h in hand])) == pytest.approx(
        (0.4 + 0.0 + 0.6) / 3
    )
    pooled = (2 + 0 + 3) / (5 + 2 + 5)  # what a ratio of bigram sums would say
    assert pooled != pytest.approx(1 / 3)


def test_a_word_is_dropped_when_its_pieces_receive_little_attention_over_the_output():
    src = ["▁the", "▁bl", "ue", "▁cat", "</s>"]  # three words, "blue" in two pieces
    weights = np.array(
        [  # rows: target positions; columns: source pieces
            [0.7, 0.1, 0.1, 0.0, 0.1],
            [0.0, 0.2, 0.2, 0.1, 0.5],
            [0.6, 0.0, 0.0, 0.3, 0.1],
        ]
    )
    np.testing.assert_allclose(d.source_word_mass(amap(src, weights)), [1.3, 0.6, 0.4])
    assert d.dropped(amap(src, weights)) == (1, 3)  # "cat": 0.4 < 0.5
    assert d.dropped(amap(src, weights), below=0.7) == (2, 3)


def test_backward_sums_how_far_the_peak_moves_back_per_step():
    src = ["▁a", "▁b", "▁c", "▁d", "</s>"]
    peaks = [0, 2, 1, 3, 0]  # then </s>, left out: moves +2, -1, +2, -3
    weights = np.eye(5)[[*peaks, 4]]  # (T,S) one-hot rows
    assert d.backward(amap(src, weights)) == (4.0, 4)
    monotone = np.eye(5)[[0, 1, 1, 3, 4]]
    assert d.backward(amap(src, monotone)) == (0.0, 3)


def test_centre_distance_measures_from_the_gold_aligned_pieces_or_the_diagonal():
    src = ["▁the", "▁bl", "ue", "▁cat", "</s>"]  # words the (0), blue (pieces 1, 2), cat (3)
    tgt = ["▁die", "▁bla", "u", "</s>"]  # words die (0), blau (pieces 1, 2)
    centers = np.array([[[1.0, 2.0, 4.0, 3.0]]])  # (L=1, Hc=1, T=4) predicted p_t
    local_p = AttentionMap(src, tgt, np.full((1, 1, 4, 5), 0.2), centers)
    links = {(0, 0), (1, 1), (2, 1)}  # blau -> blue and cat: pieces 1, 2, 3, mean 2
    np.testing.assert_allclose(d.aligned_positions(local_p, links), [0, 2, 2, np.nan])
    assert d.center_distance(local_p, links) == (3.0, 3)  # |1-0| + |2-2| + |4-2|; </s> left out
    # without gold: the diagonal t·(S−1)/(T−1) = 0, 4/3, 8/3, 4
    total, count = d.center_distance(local_p)
    assert (total, count) == (pytest.approx(1 + 2 / 3 + 4 / 3 + 1), 4)
    unlinked = d.aligned_positions(local_p, {(0, 0)})  # blau has no link: NaN, not counted
    assert np.isnan(unlinked[1:]).all() and d.center_distance(local_p, {(0, 0)}) == (1.0, 1)
    assert d.center_distance(AttentionMap(src, tgt, local_p.weights, None)) == (0.0, 0)


def pieces_of(rng: random.Random, words: int) -> list[str]:
    """A sentence of ``words`` words, each in 1-3 SentencePiece pieces, then </s>."""
    pieces = []
    for w in range(words):
        pieces += [f"▁w{w}"] + [f"p{k}" for k in range(rng.randrange(3))]
    return [*pieces, "</s>"]


@pytest.mark.parametrize("seed", range(20))
def test_aligned_positions_are_each_target_words_linked_source_pieces_mean(seed):
    """Against the definition, word by word: the mean position of the pieces of the
    source words a target word is linked to (links may name words past either
    sentence's end: a truncated line); NaN where it has none, and for </s>."""
    rng = random.Random(seed)
    src, tgt = pieces_of(rng, rng.randrange(0, 7)), pieces_of(rng, rng.randrange(0, 7))
    links = {(rng.randrange(8), rng.randrange(8)) for _ in range(rng.randrange(12))}
    got = d.aligned_positions(
        AttentionMap(src, tgt, np.zeros((1, 1, len(tgt), len(src))), None), links
    )
    src_word, tgt_word = word_ids(src[:-1]), word_ids(tgt[:-1])
    want = []
    for j in tgt_word:
        linked = {i for i, k in links if k == j}
        places = [s for s, i in enumerate(src_word) if i in linked]
        want.append(np.mean(places) if places else np.nan)
    np.testing.assert_allclose(got, [*want, np.nan])


def test_word_accuracy_follows_compare_mts_rule_by_hand():
    counts = Counter({"a": 1000, "cat": 3, "sat": 1})  # "mat" unseen
    edges = (1, 2, 5)  # buckets <1, 1, [2,5), >=5
    assert d.frequency_labels(edges) == ["<1", "1", "[2,5)", ">=5"]
    table = d.word_accuracy(["a a cat sat"], ["a cat on a mat"], counts, edges)
    # reference: a a (>=5), cat ([2,5)), on mat (<1); output: a a (>=5, both match),
    # cat (match), sat (bucket 1, no match)
    assert table.tolist() == [[0, 2, 0], [0, 0, 1], [1, 1, 1], [2, 2, 2]]
    assert d.f_measure(table) == [0.0, 0.0, 1.0, 1.0]
    half = d.word_accuracy(["a"], ["a a"], counts, edges)[3]  # precision 1, recall 1/2
    assert d.f_measure(half[None]) == [pytest.approx(2 / 3)]


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_word_accuracy_equals_compare_mt_on_a_random_corpus():
    require_extra("compare_mt.bucketers", "test")
    from compare_mt import bucketers

    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(60)]
    train = [" ".join(rng.choices(vocab[:50], k=rng.randint(1, 12))) for _ in range(300)]
    refs = [" ".join(rng.choices(vocab, k=rng.randint(1, 15))) for _ in range(80)]
    hyps = [" ".join(rng.choices(vocab, k=rng.randint(0, 15))) for _ in range(80)]
    counts = d.word_counts(train)
    ours = d.word_accuracy(hyps, refs, counts)
    theirs = bucketers.FreqWordBucketer(freq_counts=dict(counts))
    stats, *_ = theirs.calc_statistics([r.split() for r in refs], [[h.split() for h in hyps]])
    assert theirs.bucket_strs == d.frequency_labels()
    assert [(m, r, o) for m, r, o, *_ in stats[0]] == [tuple(row) for row in ours.tolist()]
    assert d.f_measure(ours) == pytest.approx([f for *_, f in stats[0]])


def test_caption_figures_say_which_captions_an_output_holds():
    """Coverage caption by caption (words of each caption in order), and chrF's
    recall, checked against sacreBLEU's own character n-gram statistics."""
    from sacrebleu.metrics import CHRF

    src = ["▁a", "▁b", "▁c", "▁d", "▁e", "</s>"]  # captions: "a b" and "c d e"
    weights = np.zeros((4, 6))
    weights[:, 0], weights[:, 2] = 0.3, 0.5  # a: 1.2, c: 2.0 over four target steps
    weights[:, 1] = 0.2  # b: 0.8; d, e: nothing
    covered = d.caption_covered(amap(src, weights), [2, 3])
    assert covered == [1.0, pytest.approx(1 / 3)]
    hyp, ref = "a cat sat on the mat today", "the cat sat there"
    stats = CHRF()._extract_corpus_statistics([hyp], [[ref]])[0]  # per order: hyp, ref, match
    want = 100 * np.mean([stats[3 * n + 2] / stats[3 * n + 1] for n in range(6)])
    assert d.chrf_recall(hyp, ref) == pytest.approx(want)
    assert d.chrf_recall(ref, ref) == pytest.approx(100.0)
    assert d.chrf_recall("", ref) == 0.0
