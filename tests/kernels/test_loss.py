"""The fused output layer and label-smoothed loss against autograd through the
plain computation."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from nmt.kernels import loss as loss_module
from nmt.kernels.loss import projected_smoothed_nll

PAD = 0


def reference(states, weight, target, eps):
    logp = torch.log_softmax(states @ weight.t(), dim=-1)  # (B,T,V)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    loss = (1 - eps) * nll - eps * logp.mean(-1)
    return loss * (target != PAD)


def inputs(dtype=torch.float64, seed=0):
    torch.manual_seed(seed)
    states = torch.randn(3, 7, 5, dtype=dtype, requires_grad=True)
    weight = torch.randn(11, 5, dtype=dtype, requires_grad=True)
    target = torch.randint(1, 11, (3, 7))
    target[1, 4:] = PAD
    target[2, 6] = PAD
    return states, weight, target


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5])
@pytest.mark.parametrize("block_rows", [2, 1000])
def test_loss_and_gradients_match_autograd(eps, block_rows, monkeypatch):
    # Blocks of 2 rows exercise the CPU's cache-sized blocking; 1000 rows is one block.
    monkeypatch.setattr(loss_module, "CPU_BLOCK_BYTES", 8 * 11 * block_rows)  # float64, V 11
    states, weight, target = inputs()
    upstream = torch.rand(3, 7, dtype=torch.float64)  # any upstream gradient
    loss = projected_smoothed_nll(states, weight, target, eps, PAD)
    want_loss = reference(states, weight, target, eps)
    torch.testing.assert_close(loss, want_loss)
    assert (loss[1, 4:] == 0).all()
    got = torch.autograd.grad((loss * upstream).sum(), (states, weight))
    want = torch.autograd.grad((want_loss * upstream).sum(), (states, weight))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
    assert (got[0][1, 4:] == 0).all()  # padding gets no gradient


def test_a_frozen_input_gets_no_gradient_and_the_other_the_same():
    states, weight, target = inputs()
    loss = projected_smoothed_nll(states, weight, target, 0.1, PAD)
    both = torch.autograd.grad(loss.sum(), (states, weight))
    frozen = weight.detach()
    loss = projected_smoothed_nll(states, frozen, target, 0.1, PAD)
    (only,) = torch.autograd.grad(loss.sum(), states)
    torch.testing.assert_close(only, both[0])


def test_summed_loss_equals_pytorch_cross_entropy_with_label_smoothing():
    states, weight, target = inputs(torch.float32, seed=1)
    loss = projected_smoothed_nll(states, weight, target, 0.1, PAD)
    want = F.cross_entropy(
        (states @ weight.t()).flatten(0, 1),
        target.flatten(),
        ignore_index=PAD,
        label_smoothing=0.1,
        reduction="sum",
    )
    torch.testing.assert_close(loss.sum(), want)


def test_bf16_logits_give_float32_losses_close_to_float32():
    """Under autocast the projection runs in bf16; the softmax and loss in float32."""
    states, weight, target = inputs(torch.float32, seed=2)
    exact = projected_smoothed_nll(states, weight, target, 0.1, PAD)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = projected_smoothed_nll(states, weight, target, 0.1, PAD)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, exact, rtol=0.05, atol=0.05)
    grads = torch.autograd.grad(loss.sum(), (states, weight))
    assert [g.dtype for g in grads] == [torch.float32, torch.float32]
    assert all(bool(torch.isfinite(g).all()) for g in grads)
