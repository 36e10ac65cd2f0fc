"""The output layer and the label-smoothed cross-entropy as one step, with a
hand-written gradient (CPU and GPU).

Label smoothing (Szegedy et al. 2016, sec. 7) trains against the mixture
(1 − ε)·onehot(y) + ε·uniform, so the loss of a token is
(1 − ε)·(−log p_y) + ε·mean_v(−log p_v), and its gradient with respect to the
logits z = W x is p − (1 − ε)·onehot(y) − ε/V. Three things make this cheaper
than logits followed by a loss:

- only the rows of real target tokens are projected: bucketed batches still pad
  a few percent of target positions, and the output layer over 8,000 pieces is
  the widest matmul of the model;
- the (N,V) matrix is only ever the softmax p: the one-hot and uniform parts of
  the gradient reach x and W as gathers and rank-one terms (−(1 − ε)·W_y,
  −ε/V·Σ_v W_v; an index_add and −ε/V·Σ_n x_n), so the backward makes no pass
  over it besides its two matmuls;
- on the CPU the log-softmax, the loss terms and the exponential run over
  blocks of rows that stay in the L2 cache, and p overwrites the logits, so one
  (N,V) buffer lives from the forward to the backward.

Gain: ``python benchmarks/kernels.py`` (docs/benchmarks.md).
"""

from __future__ import annotations

import torch
from torch import Tensor

CPU_BLOCK_BYTES = 2**21  # one block of log-probabilities fits a core's L2 cache


class _ProjectedSmoothedNLL(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")
    def forward(
        ctx, states: Tensor, weight: Tensor, target: Tensor, eps: float, pad: int
    ) -> Tensor:
        B, T, D = states.shape
        rows = (target != pad).flatten().nonzero().squeeze(1)  # (N,) real target tokens
        x = states.reshape(B * T, D).index_select(0, rows)  # (N,D)
        y = target.flatten().index_select(0, rows)  # (N,)
        logits = x @ weight.t()  # (N,V); bf16 under CUDA autocast
        probs = logits.to(torch.promote_types(logits.dtype, torch.float32))  # (N,V)
        N, V = probs.shape
        row_bytes = V * probs.element_size()
        block = N if probs.device.type != "cpu" else max(1, CPU_BLOCK_BYTES // row_bytes)
        nll, smooth = probs.new_empty(N, 1), probs.new_empty(N)
        for lo in range(0, N, block):
            part = probs[lo : lo + block]  # (b,V) logits, then probabilities
            logp = torch.log_softmax(part, dim=-1)  # (b,V)
            torch.gather(logp, 1, y[lo : lo + block, None], out=nll[lo : lo + block])
            torch.mean(logp, dim=-1, out=smooth[lo : lo + block])
            torch.exp(logp, out=part)
        nll = nll.squeeze(1).neg_()  # (N,)
        loss = (1 - eps) * nll - eps * smooth if eps > 0 else nll
        ctx.save_for_backward(x, weight, y, rows, probs)
        ctx.eps, ctx.shape = eps, (B, T, D)
        return probs.new_zeros(B * T).index_copy_(0, rows, loss).view(B, T)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None, None, None]:
        x, weight, y, rows, probs = ctx.saved_tensors
        eps, (B, T, D), V = ctx.eps, ctx.shape, weight.size(0)
        g = grad.reshape(-1).index_select(0, rows).unsqueeze(1).to(x.dtype)  # (N,1)
        d_states = d_weight = None
        if ctx.needs_input_grad[0]:
            dx = (probs @ weight).to(x.dtype)  # (N,D)
            dx.sub_(weight.index_select(0, y), alpha=1 - eps)
            if eps > 0:
                dx.sub_(weight.sum(0), alpha=eps / V)
            d_states = x.new_zeros(B * T, D).index_copy_(0, rows, dx.mul_(g)).view(B, T, D)
        if ctx.needs_input_grad[1]:
            gx = x * g  # (N,D)
            d_weight = (probs.t() @ gx).to(weight.dtype)  # (V,D)
            d_weight.index_add_(0, y, gx.to(weight.dtype), alpha=-(1 - eps))
            if eps > 0:
                d_weight.sub_(gx.sum(0).to(weight.dtype), alpha=eps / V)
        return d_states, d_weight, None, None, None


def projected_smoothed_nll(
    states: Tensor, weight: Tensor, target: Tensor, eps: float, pad: int
) -> Tensor:
    """Decoder states (B,T,D) through the output layer ``weight`` (V,D) (no bias) ->
    the label-smoothed loss of each target token (B,T), 0 where ``target`` is ``pad``."""
    return _ProjectedSmoothedNLL.apply(states, weight, target, eps, pad)
