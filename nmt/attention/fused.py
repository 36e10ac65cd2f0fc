"""Fused scaled dot-product attention (Vaswani et al. 2017, eq. 1) on the kernels
that suit a translation model's ever-changing batch shapes.

PyTorch may pick cuDNN's attention on recent GPUs, and cuDNN builds an execution
plan for every new (batch, length) shape: measured on an H100, a training step on
a batch shape seen for the first time took 323 ms against 19 ms on a shape seen
before (``benchmarks/profile_step.py``). Length-bucketed batches almost never repeat
a shape within an epoch, so cuDNN is left out; flash, memory-efficient and the
reference (math) kernels need no per-shape plan.

On the CPU, dropout on the attention weights sends PyTorch to its math kernel,
which draws one Bernoulli variate per weight; the same computation written out
with :mod:`nmt.dropout`'s masks took 12.3–13.2 ms against 15.3–15.7 ms
(forward + backward, 70 sentences of 30 tokens, 4 heads, 2 CPU cores).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

from nmt.attention.base import masked_softmax
from nmt.dropout import dropout

BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def fused_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None = None,
    is_causal: bool = False,
    dropout_p: float = 0.0,
) -> Tensor:
    """q (B,H,L,Dh) against k, v (B,H,t,Dh) -> (B,H,L,Dh); ``attn_mask`` an additive
    bias or boolean (True = attend) broadcastable to (B,H,L,t)."""
    if dropout_p > 0 and q.device.type == "cpu":
        return written_out(q, k, v, attn_mask, is_causal, dropout_p)
    with sdpa_kernel(BACKENDS):
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, is_causal=is_causal, dropout_p=dropout_p
        )


def written_out(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None,
    is_causal: bool,
    dropout_p: float,
) -> Tensor:
    """What :func:`fused_attention` computes, as explicit (B,H,L,t) weights; a row
    that a boolean or causal mask leaves empty gets no weight, as in SDPA."""
    L, t = q.size(-2), k.size(-2)
    scores = (q * q.size(-1) ** -0.5) @ k.transpose(-1, -2)  # (B,H,L,t)
    see = torch.ones(L, t, dtype=torch.bool, device=q.device)  # (L,t)
    if is_causal:  # query i sees keys 0..i, as SDPA's is_causal
        see = see.tril()
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        see = see & attn_mask
    elif attn_mask is not None:
        scores = scores + attn_mask
    weights = masked_softmax(scores, see)  # (B,H,L,t); see broadcasts
    return dropout(weights, dropout_p, training=True) @ v
