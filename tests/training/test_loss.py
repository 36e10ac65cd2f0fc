"""The label-smoothed loss's closed-form gradient against autograd's."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from nmt.training.loss import smoothed_nll

PAD = 0


def reference(logits, target, eps):
    logp = torch.log_softmax(logits, dim=-1)
    nll = -logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    loss = (1 - eps) * nll - eps * logp.mean(-1)
    return loss.masked_fill(target == PAD, 0.0), nll


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5])
def test_loss_and_gradient_match_autograd(eps):
    torch.manual_seed(0)
    logits = torch.randn(3, 7, 11, dtype=torch.float64, requires_grad=True)
    target = torch.randint(1, 11, (3, 7))
    target[1, 4:] = PAD
    weight = torch.rand(3, 7, dtype=torch.float64)  # any upstream gradient
    loss, nll = smoothed_nll(logits, target, eps, PAD)
    want_loss, want_nll = reference(logits, target, eps)
    torch.testing.assert_close(loss, want_loss)
    torch.testing.assert_close(nll, want_nll.detach())
    assert not nll.requires_grad and (loss[1, 4:] == 0).all()
    (grad,) = torch.autograd.grad((loss * weight).sum(), logits)
    (want,) = torch.autograd.grad((want_loss * weight).sum(), logits)
    torch.testing.assert_close(grad, want)
    assert (grad[1, 4:] == 0).all()


def test_summed_loss_equals_pytorch_cross_entropy_with_label_smoothing():
    torch.manual_seed(1)
    logits = torch.randn(4, 5, 9)
    target = torch.randint(0, 9, (4, 5))
    loss, _ = smoothed_nll(logits, target, 0.1, PAD)
    want = F.cross_entropy(
        logits.flatten(0, 1),
        target.flatten(),
        ignore_index=PAD,
        label_smoothing=0.1,
        reduction="sum",
    )
    torch.testing.assert_close(loss.sum(), want)
