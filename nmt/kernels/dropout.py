"""Dropout (Srivastava et al. 2014) with cheap masks on the CPU.

Why: PyTorch's CPU dropout draws one Bernoulli variate per element (~8 ns each);
one 64-bit PCG64 draw (O'Neill 2014) here gives four 16-bit lanes. Gain:
``python benchmarks/kernels.py`` (docs/benchmarks.md).

An element is kept when its lane is at or above a threshold: the drop
probability is p rounded to a multiple of 2⁻¹⁶ (0.1 becomes 0.100006) and the
kept values are scaled by the exact inverse of the keep probability, so the
expectation is unchanged. Every mask's generator is seeded with a draw from
torch's default generator, so ``torch.manual_seed`` makes the masks reproducible
and a checkpoint's RNG state resumes them. Inside ``torch.compile`` (``train.compile``)
PyTorch's own dropout runs instead: the compiled graph draws and fuses its masks.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

LANES = 2**16  # a 16-bit lane takes this many values


def uniform_lanes(n: int) -> Tensor:
    """n int16 values uniform over [−2¹⁵, 2¹⁵): the four lanes of each 64-bit draw
    of a PCG64 generator seeded from torch's default generator."""
    seed = int(torch.empty((), dtype=torch.int64).random_())  # in [0, 2⁶³)
    words = np.random.PCG64(seed).random_raw((n + 3) // 4)  # uint64
    return torch.from_numpy(words.view(np.int16)[:n])


def keep_mask(shape: torch.Size, p: float, dtype: torch.dtype) -> tuple[Tensor, float]:
    """A CPU mask of ``shape`` in ``dtype``: 1 with probability
    1 − round(p·2¹⁶)/2¹⁶, else 0; and that keep probability."""
    dropped = round(p * LANES)
    lanes = uniform_lanes(shape.numel()).view(shape)
    keep = torch.ge(lanes, dropped - LANES // 2, out=torch.empty(shape, dtype=dtype))
    return keep, 1 - dropped / LANES


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Zero each element with probability p and scale the rest by 1/(1 − p)."""
    if not training or p == 0.0:
        return x
    # a compiled graph draws its own masks (numpy's generator cannot be traced)
    if x.device.type != "cpu" or p == 1.0 or torch.compiler.is_compiling():
        return F.dropout(x, p, training=True)
    keep, kept = keep_mask(x.shape, p, x.dtype)
    return x * keep.mul_(1.0 / kept)


class PCGDropout(nn.Dropout):
    """``nn.Dropout`` with :func:`dropout`'s masks."""

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)
