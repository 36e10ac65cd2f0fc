"""Heatmaps stay readable and renderable whatever the sentence's length."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nmt.inspection.maps import (
    LABEL_INCHES,
    MAX_INCHES,
    AttentionMap,
    attention_maps,
    each_attention_map,
    grid_figure,
    heatmap_figure,
    ticks,
    word_alignment,
)
from nmt.inspection.plotting import pyplot, save_figure
from nmt.model.load import load_model
from nmt.setup.attention import ATTENTION
from tests.helpers import VOCAB, tiny_model


def amap(T: int, S: int, layers: int = 2, heads: int = 4) -> AttentionMap:
    w = np.random.default_rng(0).random((layers, heads, T, S))
    return AttentionMap(
        [f"s{i}" for i in range(S)], [f"t{i}" for i in range(T)], w / w.sum(-1, keepdims=True), None
    )


@pytest.mark.parametrize("n", [1, 10, 300, 2000])
@pytest.mark.parametrize("inches", [2.0, 10.0, 40.0])
def test_tick_labels_fit_their_axis_and_name_their_piece(n, inches):
    pieces = [f"p{i}" for i in range(n)]
    positions, labels = ticks(pieces, inches)
    assert positions[0] == 0 and positions == sorted(set(positions))
    if len(positions) == n:
        assert labels == pieces
    else:  # thinned: they fit, each says which piece it is
        assert len(labels) * LABEL_INCHES <= inches + LABEL_INCHES
        assert all(label == f"{i} p{i}" for i, label in zip(positions, labels))


@pytest.mark.slow  # draws a long sentence: a second or more
def test_a_long_sentence_gives_a_bounded_figure():
    """1,000 pieces used to ask for a canvas hundreds of inches a side."""
    long = amap(1000, 1000)
    for fig in (
        heatmap_figure(long, -1, "mean", "long"),
        grid_figure(long, [0, 1], ["0", "1"], ""),
    ):
        assert max(fig.get_size_inches()) <= MAX_INCHES
        pyplot().close(fig)


@pytest.mark.slow
def test_a_grid_with_thinned_labels_renders(tmp_path):
    """Four 10-inch panels of 100 pieces: too many labels across, so every k-th is
    drawn with its index; the figure still renders."""
    fig = grid_figure(amap(100, 100, 1, 4), [0], ["0", "1", "2", "3"], "thinned")
    across = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert 1 < len(across) < 100 and across[0] == "0 s0"
    assert all(label.split()[1] == f"s{label.split()[0]}" for label in across)
    save_figure(fig, tmp_path / "grid.png")
    assert (tmp_path / "grid.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_short_sentence_labels_every_piece():
    fig = heatmap_figure(amap(5, 7), 0, "0", "short")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == [f"s{i}" for i in range(7)]
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"t{i}" for i in range(5)]
    pyplot().close(fig)


def test_word_alignment_reads_the_mean_map_without_eos_or_the_supervised_heads():
    """Averaged over layers and heads, </s> left out on both sides; under guided
    alignment, the supervised layer's first heads alone (Garg et al. 2019)."""
    src, tgt = ["▁a", "▁b", "</s>"], ["▁x", "▁y", "</s>"]
    w = np.zeros((2, 2, 3, 3))  # (L,H,T,S)
    w[...] = [0.35, 0.25, 0.4]  # a preferred; </s> has the most, yet is no word
    w[0, :, 1] = [0.0, 0.6, 0.4]  # y: both heads of layer 0 say b
    w[1, 1, 0] = [0.0, 0.6, 0.4]  # x: the second head of layer 1 says b
    amap = AttentionMap(src, tgt, w, None)
    assert word_alignment(amap) == {(1, 0), (1, 1)}  # x: b .34 > a .26; y: b .43 > a .18
    assert word_alignment(amap, guided=(1, 2)) == {(1, 0), (0, 1)}
    assert word_alignment(amap, guided=(1, 1)) == {(0, 0), (0, 1)}
    assert word_alignment(amap, guided=(0, 1)) == {(0, 0), (1, 1)}
    w[1, 0, 0], w[1, 1, 0] = [0.6, 0.0, 0.4], [0.25, 0.35, 0.4]  # x: the mean of the two
    assert word_alignment(amap, guided=(1, 2)) == {(0, 0), (0, 1)}  # heads, not the last


@pytest.mark.parametrize("src, tgt", [(["</s>"], ["▁x", "</s>"]), (["▁a", "</s>"], ["</s>"])])
def test_an_empty_side_has_no_links(src, tgt):
    w = np.full((1, 1, len(tgt), len(src)), 1 / len(src))
    assert word_alignment(AttentionMap(src, tgt, w, None)) == set()


@pytest.mark.parametrize("kind", ATTENTION.names())
def test_each_map_is_its_sentence_read_alone_whatever_shares_its_batch(kind, tiny_run):
    """Sentences are batched by length, not in the order asked for: each index asked
    for comes back once, with the map its sentence gives read alone (padding and the
    batch's other sentences change nothing)."""
    vocabs = load_model(tiny_run, torch.device("cpu")).vocabs  # piece names for ids < VOCAB
    model = tiny_model(kind).eval()
    g = torch.Generator().manual_seed(0)
    lengths = [5, 40, 1, 17, 3, 40, 9, 2]
    src = [torch.randint(4, VOCAB, (n,), generator=g).tolist() for n in lengths]
    tgt = [torch.randint(4, VOCAB, (n,), generator=g).tolist() for n in reversed(lengths)]
    asked = [6, 0, 3, 2, 5, 7]
    got = list(each_attention_map(model, vocabs.src, vocabs.tgt, src, tgt, asked, batch=2))
    assert sorted(i for i, _ in got) == sorted(asked)
    for i, amap in got:
        (alone,) = attention_maps(model, vocabs.src, vocabs.tgt, [src[i]], [tgt[i]])
        assert (amap.src, amap.tgt) == (alone.src, alone.tgt)
        np.testing.assert_allclose(amap.weights, alone.weights, atol=1e-5)
        if alone.centers is not None:
            np.testing.assert_allclose(amap.centers, alone.centers, atol=1e-4)
