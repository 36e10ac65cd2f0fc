"""Scaled dot-product attention (Vaswani et al. 2017, eq. 1) through PyTorch's
fused kernel, with cuDNN's left out: cuDNN builds a plan for every new (batch,
length) shape, and length-bucketed batches rarely repeat one
(docs/performance.md)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def scaled_dot_product(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    causal: bool = False,
    dropout: float = 0.0,
) -> Tensor:
    """softmax(q·kᵀ / sqrt(Dh) + mask)·v with dropout on the weights: q (B,H,L,Dh)
    against k, v (B,H,t,Dh) -> (B,H,L,Dh); ``mask`` an additive bias or boolean
    (True = attend) broadcastable to (B,H,L,t); ``causal``: query i sees keys 0..i."""
    with sdpa_kernel(BACKENDS):
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=causal, dropout_p=dropout
        )
