"""Speed kernels, kept out of the model and switched on in one place.

The model is written with PyTorch's own modules and functions (``nn.Dropout``,
``F.scaled_dot_product_attention``, an output layer followed by the loss) and
the papers' equations (local attention's dense window). The trainer, under
``train.kernels: auto`` (the default), swaps in what pays for a training step,
each computing the same function: :func:`install` re-classes the model's
``nn.Dropout`` modules as :class:`~nmt.kernels.dropout.PCGDropout` (cheaper
masks on the CPU; no state is added, so parameter names, checkpoints and hooks
are untouched) and offers every cross-attention the kernels by name (``use_kernels``:
local-p's Gaussian window with a hand-written gradient,
:mod:`nmt.kernels.gaussian`), and the trainer's loss runs the output
layer fused with the label-smoothed loss (:mod:`nmt.kernels.loss`, CPU and
GPU). ``off`` trains the plain model. Local attention's banded path
(:mod:`nmt.attention.bands`) is switched by a model key instead,
``model.attention.path``, as it serves decoding too. ``python
benchmarks/kernels.py`` measures what each saves, side by side;
docs/benchmarks.md has the figures, including those of the kernels that were
dropped for saving under 3% of a step.
"""

from __future__ import annotations

from torch import nn

from nmt.attention.base import CrossAttention
from nmt.kernels import gaussian
from nmt.kernels.dropout import PCGDropout

# The fast functions a cross-attention may take, by name (``use_kernels``).
KERNELS = {"gaussian_window": gaussian.gaussian_window}


def install(model: nn.Module) -> int:
    """Re-class every ``nn.Dropout`` of ``model`` as :class:`PCGDropout` and offer
    every cross-attention the kernels (``use_kernels``: local-p takes its Gaussian
    window with a hand-written gradient; a plug-in variant may take one too);
    returns how many dropout modules it re-classed."""
    taken = 0
    for module in model.modules():
        if type(module) is nn.Dropout:
            module.__class__ = PCGDropout
            taken += 1
        elif isinstance(module, CrossAttention):
            module.use_kernels(KERNELS)
    return taken
