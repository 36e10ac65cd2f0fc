"""local_m and local_p: windows, Gaussians, the two computation paths."""

from __future__ import annotations

import pytest
import torch

from nmt.attention import ATTENTION
from tests.attention.test_attention import H, build, global_twin, inputs

LOCAL = [
    ("local_m", {}),
    ("local_m", {"center": "length_ratio", "ratio": 1.7}),
    ("local_p", {"gaussian": "multiply"}),
    ("local_p", {"gaussian": "bias", "per_head": False}),
    ("local_m", {"score": "concat"}),
    ("local_p", {"score": "general"}),
]


def run(attn, lengths, T, need_weights=True, positions=None):
    torch.manual_seed(1)  # the same inputs for every call
    query, memory, src_mask, pos = inputs(lengths, T)
    mem = attn.project_memory(memory, src_mask)
    return attn(query, mem, src_mask, pos if positions is None else positions, need_weights)


@pytest.mark.parametrize(("kind", "options"), LOCAL)
def test_windowed_and_dense_paths_agree(kind, options):
    torch.manual_seed(0)
    windowed = build(kind, window=3, path="windowed", **options)
    dense = build(kind, window=3, path="dense", **options)
    dense.load_state_dict(windowed.state_dict())
    lengths, T = (120, 77), 90
    a, b = run(windowed, lengths, T), run(dense, lengths, T)
    torch.testing.assert_close(a.context, b.context, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a.weights, b.weights, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("spread", [0, 3, 40, 500])
def test_tiled_blocks_hold_every_query_once_with_its_window_in_the_band(spread):
    """local_p's blocks for centres in any order, clustered (spread 0) or scattered."""
    attn = build("local_p", window=3)
    C = attn.width
    torch.manual_seed(spread)
    lo = torch.randint(-3, spread + 1, (2, H, 300)) + torch.randint(0, 40, (2, 1, 1))
    blocks = attn._tiled_blocks(lo)
    n = blocks.start.size(-1)
    for b in range(2):
        for h in range(H):
            slots = blocks.slot[b, h]
            assert len(set(slots.tolist())) == 300 and slots.min() >= 0 and slots.max() < n * C
            start = blocks.start[b, h, slots // C]  # each query's band
            assert (lo[b, h] >= start).all()
            assert (lo[b, h] + C <= start + blocks.length).all()  # the window ends inside
            tiles = torch.div(lo[b, h], C, rounding_mode="floor").unique().numel()
            assert n <= -(-300 // C) + tiles
    assert blocks.length == 2 * C - 1


@pytest.mark.parametrize(("kind", "options"), LOCAL)
def test_windowed_and_dense_paths_give_the_same_gradients(kind, options):
    torch.manual_seed(0)
    windowed = build(kind, window=3, path="windowed", **options).train()
    dense = build(kind, window=3, path="dense", **options).train()
    dense.load_state_dict(windowed.state_dict())
    for attn in (windowed, dense):
        run(attn, (120, 77), 90, need_weights=False).context.pow(2).sum().backward()
    for (name, a), b in zip(windowed.named_parameters(), dense.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.parametrize(("kind", "options"), LOCAL)
def test_weight_falls_on_exactly_the_window_on_the_source(kind, options):
    """Window [p_t − w, p_t + w] (p_t rounded), 2w+1 positions, less those past the
    sentence: every one of them gets weight, no other position does."""
    attn = build(kind, window=2, **options)
    out = run(attn, (30, 11), 25)
    lo = torch.round(out.extras.centers).long().unsqueeze(-1) - 2  # (B,Hc,T,1)
    s = torch.arange(30)
    inside = (s >= lo) & (s <= lo + 4) & (s < torch.tensor([30, 11]).view(2, 1, 1, 1))
    assert torch.equal(out.weights > 0, inside.expand_as(out.weights))
    if attn.normalised:
        torch.testing.assert_close(out.weights.sum(-1), torch.ones(2, H, 25))


@pytest.mark.parametrize("gaussian", ["multiply", "bias"])
@pytest.mark.parametrize("window", [1, 4])
def test_local_p_weights_follow_their_formulas(gaussian, window):
    """From global attention's weights g with the same projections, and the Gaussian
    exp(−(s − p_t)²/2σ²) with σ = w/2 (Luong et al. 2015, eq. 10): ``multiply`` is
    g renormalised over the window, times the Gaussian; ``bias`` (Yang et al. 2018,
    eq. 4) is g times the Gaussian, renormalised over the window."""
    local = build("local_p", window=window, gaussian=gaussian)
    glob = global_twin(local)
    out, g = run(local, (30, 11), 25), run(glob, (30, 11), 25).weights  # (B,H,T,S)
    p = out.extras.centers.unsqueeze(-1)  # (B,H,T,1)
    s = torch.arange(30)
    inside = (s >= torch.round(p) - window) & (s <= torch.round(p) + window)
    gauss = torch.exp(-((s - p) ** 2) / (2 * (window / 2) ** 2))
    g = g * inside
    if gaussian == "multiply":
        want = g / g.sum(-1, keepdim=True) * gauss
    else:
        want = g * gauss / (g * gauss).sum(-1, keepdim=True)
    torch.testing.assert_close(out.weights, want, atol=1e-6, rtol=1e-5)


def test_local_m_with_a_covering_window_equals_global():
    local = build("local_m", window=50)
    glob = build("global")
    glob.load_state_dict(local.state_dict())
    a, b = run(local, (20, 9), 12), run(glob, (20, 9), 12)
    torch.testing.assert_close(a.context, b.context, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a.weights, b.weights, atol=1e-6, rtol=1e-5)


def test_local_m_centres_follow_positions_and_stay_on_the_source():
    attn = build("local_m", window=1, center="length_ratio", ratio=2.0)
    out = run(attn, (10, 4), 30, positions=torch.arange(30))
    assert out.extras.centers[0, 0, 6].item() == 3.0  # 6 / 2
    assert out.extras.centers[1].max().item() == 3.0  # clamped to the last real position


def test_local_p_centres_scale_with_each_sentence_length():
    attn = build("local_p")
    out = run(attn, (40, 8), 10)
    assert (out.extras.centers[0] <= 40).all() and (out.extras.centers[1] <= 8).all()
    assert (out.extras.centers >= 0).all()


@pytest.mark.parametrize("gaussian", ["multiply", "bias"])
def test_local_p_gradient_reaches_the_centre_predictor(gaussian):
    attn = build("local_p", gaussian=gaussian).train()
    run(attn, (15, 9), 7, need_weights=False).context.pow(2).sum().backward()
    assert attn.center_proj.weight.grad.abs().sum() > 0
    assert attn.center_v.grad.abs().sum() > 0


def test_auto_path_uses_the_band_only_for_long_sources(monkeypatch):
    attn = build("local_m", window=2)
    calls = []
    original = type(attn)._windowed
    monkeypatch.setattr(type(attn), "_windowed", lambda *a: calls.append(1) or original(*a))
    run(attn, (12, 12), 12)
    assert not calls
    run(attn, (400, 400), 400)
    assert calls


def test_registry_holds_the_four_variants():
    assert {"global", "local_m", "local_p", "hard"} <= set(ATTENTION.names())
