"""Dropout with 16-bit-lane masks: the right keep rate in every lane, the right
scale, reproducible, and the identity where it should be."""

from __future__ import annotations

import pytest
import torch

from nmt.dropout import Dropout, dropout, keep_mask, relu_dropout
from nmt.model.layers import FeedForward


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_each_lane_keeps_with_probability_one_minus_p(p):
    torch.manual_seed(0)
    keep, kept = keep_mask(torch.Size([400_000]), p, torch.float32)
    assert kept == pytest.approx(1 - p, abs=2**-16)
    # four lanes come from one 64-bit draw: each must be unbiased on its own
    rate = keep.view(-1, 4).mean(0)  # (4,)
    sd = (kept * (1 - kept) / 100_000) ** 0.5
    assert ((rate - kept).abs() < 5 * sd).all(), rate


def test_kept_values_are_scaled_so_the_mean_is_unchanged():
    torch.manual_seed(1)
    x = torch.full((1001, 999), 3.0)  # a size that is not a multiple of four
    y = dropout(x, 0.25, training=True)
    assert torch.unique(y).tolist() == [0.0, pytest.approx(3.0 / 0.75, rel=1e-6)]
    assert y.mean().item() == pytest.approx(3.0, rel=0.01)


def test_gradient_is_the_mask_times_the_scale():
    torch.manual_seed(2)
    x = torch.randn(64, 33, requires_grad=True)
    y = dropout(x, 0.4, training=True)
    y.sum().backward()
    kept = y != 0
    torch.testing.assert_close(x.grad, kept.float() / (1 - round(0.4 * 2**16) / 2**16))


def test_same_seed_same_mask_and_identity_in_eval():
    x = torch.randn(50, 50)
    torch.manual_seed(3)
    a = dropout(x, 0.1, training=True)
    torch.manual_seed(3)
    b = dropout(x, 0.1, training=True)
    assert torch.equal(a, b) and not torch.equal(a, x)
    layer = Dropout(0.1).eval()
    assert layer(x) is x
    assert dropout(x, 0.0, training=True) is x
    assert (dropout(x, 1.0, training=True) == 0).all()


def test_probability_outside_zero_one_is_refused():
    with pytest.raises(ValueError, match="dropout probability"):
        Dropout(1.5)


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 1.0])
def test_relu_dropout_is_dropout_of_relu_with_the_same_mask_and_gradient(p):
    x = torch.randn(37, 29, requires_grad=True)
    upstream = torch.randn(37, 29)
    torch.manual_seed(4)
    want = dropout(torch.relu(x), p, training=True)
    torch.manual_seed(4)
    y, scale = relu_dropout(x, p, training=True)
    torch.testing.assert_close(y * scale, want)
    (got,) = torch.autograd.grad((y * scale * upstream).sum(), x)
    (expected,) = torch.autograd.grad((want * upstream).sum(), x)
    torch.testing.assert_close(got, expected)


def test_relu_dropout_in_eval_is_relu():
    x = torch.randn(20, 7)
    y, scale = relu_dropout(x, 0.3, training=False)
    assert scale == 1.0 and torch.equal(y, torch.relu(x))


@pytest.mark.parametrize("train", [True, False])
def test_feed_forward_equals_its_modules_applied_in_turn(train):
    ffn = FeedForward(8, 32, 0.2).train(train)
    x = torch.randn(3, 5, 8)
    torch.manual_seed(5)
    got = ffn(x)
    torch.manual_seed(5)
    want = x
    for module in ffn:  # Linear, ReLU, Dropout, Linear
        want = module(want)
    torch.testing.assert_close(got, want)
