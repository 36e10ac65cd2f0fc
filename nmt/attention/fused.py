"""Fused scaled dot-product attention (Vaswani et al. 2017, eq. 1) on the kernels
that suit a translation model's ever-changing batch shapes.

PyTorch may pick cuDNN's attention on recent GPUs, and cuDNN builds an execution
plan for every new (batch, length) shape: measured on an H100, a training step on
a batch shape seen for the first time took 323 ms against 19 ms on a shape seen
before (``benchmarks/profile_step.py``). Length-bucketed batches almost never repeat
a shape within an epoch, so cuDNN is left out; flash, memory-efficient and the
reference (math) kernels need no per-shape plan.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

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
    with sdpa_kernel(BACKENDS):
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, is_causal=is_causal, dropout_p=dropout_p
        )
