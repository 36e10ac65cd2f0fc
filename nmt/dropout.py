"""Dropout (Srivastava et al. 2014) with cheap masks on the CPU.

PyTorch's CPU dropout draws one Bernoulli variate per element, about 8 ns each:
in a training step of the reference recipe on 2 cores that was 23% of the time
(``benchmarks/profile_step.py``). Here each 64-bit draw of the generator gives
four 16-bit lanes, and an element is kept when its lane is at or above a
threshold: the drop probability is p rounded to a multiple of 2⁻¹⁶ (0.1 becomes
0.100006) and the kept values are scaled by the exact inverse of the keep
probability, so the expectation is unchanged. The draws come from the default
generator, so ``torch.manual_seed`` makes them reproducible. Other devices keep
PyTorch's own kernel (fast counter-based generators, fused with the multiply).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

LANES = 2**16  # a 16-bit lane takes this many values


def keep_mask(shape: torch.Size, p: float) -> tuple[Tensor, float]:
    """A boolean CPU mask of ``shape`` whose elements are True with probability
    1 − round(p·2¹⁶)/2¹⁶, and that keep probability."""
    dropped = round(p * LANES)
    n = shape.numel()
    words = torch.empty((n + 3) // 4, dtype=torch.int64).random_(-(2**63), 2**63 - 1)
    lanes = words.view(torch.int16)[:n].view(shape)  # uniform over [−2¹⁵, 2¹⁵)
    return lanes >= dropped - LANES // 2, 1 - dropped / LANES


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1 − p)."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or p == 1.0:
        return F.dropout(x, p, training=True)
    keep, kept = keep_mask(x.shape, p)
    return x * (keep * (1.0 / kept)).to(x.dtype)


class Dropout(nn.Module):
    """``nn.Dropout`` with :func:`dropout`'s masks."""

    def __init__(self, p: float) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
