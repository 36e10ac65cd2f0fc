"""The attention figures of a study's report, on maps whose answers are known."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from nmt.compare import analysis
from nmt.inspection.diagnostics import backward, dropped
from nmt.inspection.maps import AttentionMap


def figures(monkeypatch, maps: list[AttentionMap]) -> dict[str, float]:
    """attention_figures over ``maps``, one per sentence, with no model behind them."""
    monkeypatch.setattr(analysis, "encode_source", lambda vocab, lines, limit: [[4]] * len(lines))
    monkeypatch.setattr(analysis, "each_attention_map", lambda *args: enumerate(maps))
    loaded = SimpleNamespace(
        model=SimpleNamespace(cfg=SimpleNamespace(max_positions=64)),
        vocabs=SimpleNamespace(src=None, tgt=None),
    )
    lines = ["x"] * len(maps)
    return analysis.attention_figures(loaded, lines, lines, None, ())[0]


def attention(peaks: list[int], S: int, heads: int = 1, centers=None) -> AttentionMap:
    """One layer whose every head puts all weight on source position peaks[t]."""
    w = np.zeros((1, heads, len(peaks), S))
    w[0, :, np.arange(len(peaks)), peaks] = 1.0
    return AttentionMap(["s"] * S, ["t"] * len(peaks), w, centers)


def uniform(T: int, S: int) -> AttentionMap:
    return AttentionMap(["s"] * S, ["t"] * T, np.full((1, 2, T, S), 1 / S), None)


def test_a_diagonal_peak_has_no_entropy_and_no_distance(monkeypatch):
    got = figures(monkeypatch, [attention([0, 1, 2, 3], S=4), attention([0, 2, 4], S=5)])
    assert got == {"entropy": pytest.approx(0.0, abs=1e-9), "peak_distance": 0.0}


def test_distance_from_the_diagonal_and_entropy_are_means_over_sentences(monkeypatch):
    """peak_distance: mean |argmax_s − t·(S−1)/(T−1)|; a single target position's
    diagonal is source position 0. Entropy: log S for uniform weights."""
    # diagonal of T=3, S=5: 0, 2, 4; peaks 4, 2, 0 -> distances 4, 0, 4
    flipped = attention([4, 2, 0], S=5)
    one = attention([2], S=3)  # T = 1: distance 2
    flat = uniform(T=3, S=4)  # argmax 0 against 0, 1.5, 3 -> mean 1.5
    got = figures(monkeypatch, [flipped, one, flat])
    assert got["peak_distance"] == pytest.approx((8 / 3 + 2 + 1.5) / 3)
    assert got["entropy"] == pytest.approx(math.log(4) / 3)
    assert "center_spread" not in got and "aer" not in got


def test_centre_spread_is_the_std_of_every_centres_offset_from_the_diagonal(monkeypatch):
    d = np.array([0.0, 2.0, 4.0])  # the diagonal of T=3, S=5
    a = attention([0, 2, 4], S=5, heads=2, centers=(d + np.array([[1, -1, 1], [0, 0, 0]]))[None])
    b = attention([0, 4], S=5, centers=np.array([[[3.0, 4.0]]]))  # diagonal 0, 4
    offsets = [1, -1, 1, 0, 0, 0, 3, 0]
    got = figures(monkeypatch, [a, b])
    assert got["center_spread"] == pytest.approx(float(np.std(offsets)))
    assert got["center_distance"] == pytest.approx(np.abs(offsets).mean())  # no gold: diagonal


def words(peaks: list[int]) -> AttentionMap:
    """Two source and two target words and </s>, target word t reading source word
    peaks[t] (</s> reads </s>)."""
    w = np.zeros((1, 1, 3, 3))
    w[0, 0, [0, 1, 2], [*peaks, 2]] = 1.0
    return AttentionMap(["▁a", "▁b", "</s>"], ["▁x", "▁y", "</s>"], w, None)


@pytest.mark.parametrize("order", ["as asked", "reversed"])
def test_each_sentences_figures_stay_its_own_whatever_order_the_maps_come_in(monkeypatch, order):
    """each_attention_map yields by length, not in the sentences' order: row i of the
    per-sentence figures is still sentence i's, and AER pairs each sentence's
    alignment with its own gold links."""
    maps = [words([0, 1]), words([1, 0]), words([1, 1])]
    came = list(enumerate(maps))[:: 1 if order == "as asked" else -1]
    monkeypatch.setattr(analysis, "encode_source", lambda vocab, lines, limit: [[4]] * len(lines))
    monkeypatch.setattr(analysis, "each_attention_map", lambda *args: iter(came))
    loaded = SimpleNamespace(
        cfg=SimpleNamespace(train=SimpleNamespace(alignment=None)),  # no guided alignment
        model=SimpleNamespace(cfg=SimpleNamespace(max_positions=64)),
        vocabs=SimpleNamespace(src=None, tgt=None),
    )
    lines = ["a b"] * len(maps)
    pairs, captions = analysis.output_figures(loaded, lines, lines)
    assert captions is None
    for i, amap in enumerate(maps):
        assert tuple(pairs["dropped"][i]) == dropped(amap)
        assert tuple(pairs["backward"][i]) == backward(amap)
    gold = [{(0, 0), (1, 1)}, {(1, 0), (0, 1)}, {(1, 0), (1, 1)}]
    got, _ = analysis.attention_figures(loaded, lines, lines, gold, ())
    assert got["aer"] == 0.0
