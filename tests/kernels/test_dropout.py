"""Dropout with 16-bit-lane masks: the right keep rate in every lane, the right
scale, reproducible, and the identity where it should be."""

from __future__ import annotations

import shutil

import pytest
import torch

from nmt.kernels.dropout import PCGDropout, dropout, keep_mask


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
    layer = PCGDropout(0.1).eval()
    assert layer(x) is x
    assert dropout(x, 0.0, training=True) is x
    assert (dropout(x, 1.0, training=True) == 0).all()


def test_probability_outside_zero_one_is_refused():
    with pytest.raises(ValueError, match="dropout probability"):
        PCGDropout(1.5)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cc") is None, reason="torch.compile needs a C compiler")
def test_under_torch_compile_the_graph_draws_its_own_masks():
    """train.compile with the CPU kernels crashed (TorchDynamo tracing numpy's
    generator: 'setStorage ... out of bounds'); a compiled dropout drops and scales
    as dropout does."""
    compiled = torch.compile(lambda x: dropout(x, 0.5, True), dynamic=True)
    for n in (4000, 40_000):  # dynamic shapes, as training compiles them
        y = compiled(torch.ones(n))
        assert set(y.unique().tolist()) <= {0.0, 2.0}
        assert 0.4 * n < int((y == 0).sum()) < 0.6 * n
