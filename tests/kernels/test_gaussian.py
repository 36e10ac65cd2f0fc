"""local-p's Gaussian window: the hand-written gradient against autograd's through
the equations of nmt.attention.local."""

from __future__ import annotations

import pytest
import torch

from nmt.attention.local import gaussian_window as reference
from nmt.kernels.gaussian import gaussian_window


@pytest.mark.parametrize("multiply", [True, False])
@pytest.mark.parametrize("centres", [4, 1])  # one centre per head, or one shared
def test_weights_and_gradients_match_autograd(multiply, centres):
    torch.manual_seed(0)
    B, H, Q, K = 2, 4, 6, 9
    scores = torch.randn(B, H, Q, K, dtype=torch.float64, requires_grad=True)
    p = (torch.rand(B, centres, Q, dtype=torch.float64) * K).requires_grad_()
    pos = torch.arange(K)
    lo = torch.round(p.detach()).long() - 2
    mask = (pos >= lo.unsqueeze(-1)) & (pos < lo.unsqueeze(-1) + 5)  # (B,Hc,Q,K)
    mask[0, :, 1] = False  # a row with no key in its window
    upstream = torch.randn(B, H, Q, K, dtype=torch.float64)
    got = gaussian_window(scores, p, pos, mask, 1.5, multiply)
    want = reference(scores, p, pos, mask, 1.5, multiply)
    torch.testing.assert_close(got, want)
    assert (got[0, :, 1] == 0).all() and (got[~mask.expand(B, H, Q, K)] == 0).all()
    grads = torch.autograd.grad((got * upstream).sum(), (scores, p))
    want_grads = torch.autograd.grad((want * upstream).sum(), (scores, p))
    torch.testing.assert_close(grads, want_grads)
    assert grads[1].abs().sum() > 0  # the gradient reaches the predicted centres
