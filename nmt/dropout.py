"""Dropout (Srivastava et al. 2014) with cheap masks on the CPU.

PyTorch's CPU dropout draws one Bernoulli variate per element, about 8 ns each:
in a training step of the reference recipe on 2 cores that was 23% of the time
(``benchmarks/profile_step.py``). Here each 64-bit draw of a PCG64 generator
(O'Neill 2014; NumPy's default, about twice as fast here as torch's CPU
Mersenne Twister) gives four 16-bit lanes, and an element is kept when its lane
is at or above a threshold: the drop probability is p rounded to a multiple of
2⁻¹⁶ (0.1 becomes 0.100006) and the kept values are scaled by the exact inverse
of the keep probability, so the expectation is unchanged. The comparison writes
the 0/1 mask straight in the input's dtype, so no boolean mask is converted.
Every mask's generator is seeded with a draw from torch's default generator, so
``torch.manual_seed`` makes the masks reproducible and a checkpoint's RNG state
resumes them. Other devices keep PyTorch's own kernel (fast counter-based
generators, fused with the multiply).
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
    if x.device.type != "cpu" or p == 1.0:
        return F.dropout(x, p, training=True)
    keep, kept = keep_mask(x.shape, p, x.dtype)
    return x * keep.mul_(1.0 / kept)


class _MaskedReLU(torch.autograd.Function):
    """relu(x)·keep for a 0/1 ``keep``, saving only the output: where the output is
    positive, x > 0 and the element was kept, so the input's gradient is the
    output's there and 0 elsewhere (one pass, where ReLU then a multiply take two
    and keep the mask besides)."""

    @staticmethod
    def forward(ctx, x: Tensor, keep: Tensor) -> Tensor:
        y = x.clamp_min(0).mul_(keep)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:
        (y,) = ctx.saved_tensors
        return torch.ops.aten.threshold_backward(grad, y, 0), None


def relu_dropout(x: Tensor, p: float, training: bool) -> tuple[Tensor, float]:
    """dropout(relu(x), p) as (y, scale), y·scale being the result: the caller folds
    the scale into the next linear layer's weights, a (D,F) multiply instead of a
    pass over (B,L,F). On the CPU the two take 3 passes forward and 1 backward
    instead of 4 and 2: on 2 cores, for a (2040,1024) feed-forward activation with
    its mask, 7.5-8.1 ms against 9.6-10.2 ms (forward + backward, medians of 40)."""
    if not training or p == 0.0:
        return torch.relu(x), 1.0
    if x.device.type != "cpu" or p == 1.0:
        return F.dropout(torch.relu(x), p, training=True), 1.0
    keep, kept = keep_mask(x.shape, p, x.dtype)
    return _MaskedReLU.apply(x, keep), 1.0 / kept


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
