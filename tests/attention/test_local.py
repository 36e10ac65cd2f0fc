"""local_m and local_p: windows, Gaussians, the two computation paths."""

from __future__ import annotations

import pytest
import torch

from nmt.attention import ATTENTION
from nmt.attention.base import Context
from tests.attention.test_attention import H, build, global_twin, inputs

LOCAL = [
    ("local_m", {}),
    ("local_m", {"center": "length_ratio", "ratio": 1.7}),
    ("local_p", {"gaussian": "multiply"}),
    ("local_p", {"gaussian": "bias", "per_head": False}),
    ("local_m", {"score": "concat"}),
    ("local_p", {"score": "general"}),
    ("local_s", {"gaussian": "bias"}),
    ("local_s", {"per_head": False, "max_step": 3.0}),
]


def run(attn, lengths, T, need_weights=True, positions=None):
    torch.manual_seed(1)  # the same inputs for every call
    query, memory, src_mask, pos = inputs(lengths, T)
    mem = attn.project_memory(memory, src_mask)
    return attn(
        query, mem, Context(pos if positions is None else positions, need_weights=need_weights)
    )


@pytest.mark.parametrize(("kind", "options"), LOCAL)
def test_weight_falls_on_exactly_the_window_on_the_source(kind, options):
    """Window [p_t − w, p_t + w] (p_t rounded), 2w+1 positions, less those past the
    sentence: every one of them gets weight, no other position does."""
    attn = build(kind, window=2, **options)
    out = run(attn, (30, 11), 25)
    lo = torch.round(out.centers).long().unsqueeze(-1) - 2  # (B,Hc,T,1)
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
    p = out.centers.unsqueeze(-1)  # (B,H,T,1)
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
    assert out.centers[0, 0, 6].item() == 3.0  # 6 / 2
    assert out.centers[1].max().item() == 3.0  # clamped to the last real position


def test_local_p_centres_scale_with_each_sentence_length():
    attn = build("local_p")
    out = run(attn, (40, 8), 10)
    assert (out.centers[0] <= 40).all() and (out.centers[1] <= 8).all()
    assert (out.centers >= 0).all()


@pytest.mark.parametrize("gaussian", ["multiply", "bias"])
def test_local_p_gradient_reaches_the_centre_predictor(gaussian):
    attn = build("local_p", gaussian=gaussian).train()
    run(attn, (15, 9), 7, need_weights=False).context.pow(2).sum().backward()
    assert attn.center_proj.weight.grad.abs().sum() > 0
    assert attn.center_v.grad.abs().sum() > 0


def test_local_s_centres_are_the_sum_of_bounded_steps_and_stop_at_the_source_end():
    """p_t = Σ_{t' ≤ t} max_step·sigmoid(v·tanh(W h_t')): non-decreasing along t, each
    step in (0, max_step), and at most the last real source position."""
    attn = build("local_s", max_step=1.5)
    with torch.no_grad():
        attn.center_v.mul_(50)  # steps far from their start of 0.75
    out = run(attn, (60, 8), 30)
    p = out.centers  # (B,H,T)
    steps = p[0].diff(dim=-1)
    assert (steps >= 0).all() and (steps < 1.5).all() and (p[0, :, 0] < 1.5).all()
    assert steps.std() > 0.1  # predicted, not a constant stride
    assert (p[1] <= 7).all() and (p[1, :, -1] == 7).all()  # 30 steps outrun 8 positions
    torch.manual_seed(1)
    query, memory, src_mask, pos = inputs((60, 8), 30)
    mem = attn.project_memory(memory, src_mask)
    state: dict = {}
    parts = [  # one query at a time, the last centre kept between steps
        attn(query[:, t : t + 1], mem, Context(pos[t : t + 1], need_weights=True), state=state)
        for t in range(30)
    ]
    torch.testing.assert_close(torch.cat([o.centers for o in parts], -1), p)


def test_local_s_gradient_reaches_the_step_predictor():
    attn = build("local_s").train()
    run(attn, (15, 9), 7, need_weights=False).context.pow(2).sum().backward()
    assert attn.center_v.grad.abs().sum() > 0


def test_registry_holds_the_four_variants():
    assert {"global", "local_m", "local_p", "hard"} <= set(ATTENTION.names())
