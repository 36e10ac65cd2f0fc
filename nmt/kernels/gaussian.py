"""local-p's Gaussian-weighted window softmax with a hand-written gradient: the
function of :func:`nmt.attention.local.gaussian_window`, which ``train.kernels:
auto`` swaps for this one in training.

With d = s − p_t, the distance of source position s from the predicted centre,
and G = −d²/2σ², local-p's weights over its window are

- ``multiply`` (Luong et al. 2015, eq. 10): a · exp(G), a = softmax of the scores;
- ``bias`` (Yang et al. 2018, eq. 4): softmax(scores + G).

Autograd through the mask, the softmax, the square and the exponential makes
twelve passes over the (…,Q,K) grid in the backward of ``multiply`` (its
dispatched operations) and keeps their inputs. With
t = ∂L/∂w ∘ w the gradients are, for ``multiply``,
∂L/∂scores = t − a·Σ_K t and ∂L/∂p = Σ_K t·d/σ²; for ``bias``, with
z = w ∘ (∂L/∂w − Σ_K ∂L/∂w ∘ w), ∂L/∂scores = z and ∂L/∂p = Σ_K z·d/σ². These take
five passes and keep the weights, the distances and (``multiply``) a.
"""

from __future__ import annotations

import torch
from torch import Tensor

from nmt.attention.base import masked_softmax


class _GaussianWindow(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx, scores: Tensor, p: Tensor, pos: Tensor, mask: Tensor, sigma: float, multiply: bool
    ) -> Tensor:
        distance = pos.to(p.dtype) - p.unsqueeze(-1)  # (B,Hc,…,Q,K)
        log_g = distance.square().mul_(-0.5 / sigma**2)  # G
        if multiply:
            a = masked_softmax(scores, mask)
            weights = a * log_g.exp_()
            ctx.save_for_backward(weights, distance, a)
        else:
            weights = masked_softmax(scores + log_g, mask)
            ctx.save_for_backward(weights, distance)
        ctx.inv_var, ctx.p_shape = sigma**-2, p.shape
        return weights

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, ...]:
        weights, distance, *a = ctx.saved_tensors
        t = grad * weights  # (B,H,…,Q,K)
        if a:  # multiply: the softmax sees ∂L/∂a = grad ∘ exp(G), and a ∘ that is t
            grad_scores = torch.addcmul(t, a[0], t.sum(-1, keepdim=True), value=-1.0)
            grad_log_g = t
        else:  # bias: one softmax over scores + G
            grad_scores = torch.addcmul(t, weights, t.sum(-1, keepdim=True), value=-1.0)
            grad_log_g = grad_scores
        # ∂G/∂p = d/σ²; p may be shared by the heads (Hc = 1): sum over them too
        grad_p = (grad_log_g * distance).sum(-1).sum_to_size(ctx.p_shape) * ctx.inv_var
        return grad_scores, grad_p, None, None, None, None


def gaussian_window(
    scores: Tensor, p: Tensor, pos: Tensor, mask: Tensor, sigma: float, multiply: bool
) -> Tensor:
    """:func:`nmt.attention.local.gaussian_window` (same arguments, same weights)
    with the gradient of the module docstring."""
    return _GaussianWindow.apply(scores, p, pos, mask, sigma, multiply)
