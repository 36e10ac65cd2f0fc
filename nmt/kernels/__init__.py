"""CPU training kernels, kept out of the model and switched on in one place.

The model is written with PyTorch's own modules and functions (``nn.Dropout``,
``F.scaled_dot_product_attention``, an output layer followed by the loss). The
trainer, under ``train.kernels: auto`` (the default), swaps in what pays for a
training step, each computing the same function: :func:`install` re-classes the
model's ``nn.Dropout`` modules as :class:`~nmt.kernels.dropout.PCGDropout`
(cheaper masks on the CPU; no state is added, so parameter names, checkpoints
and hooks are untouched), and the trainer's loss runs the output layer fused
with the label-smoothed loss (:mod:`nmt.kernels.loss`, CPU and GPU). ``off``
trains the plain model. ``python benchmarks/kernels.py`` measures what each
saves, side by side; docs/benchmarks.md has the figures, including those of the
kernels that were dropped for saving under 3% of a step.
"""

from __future__ import annotations

from torch import nn

from nmt.kernels.dropout import PCGDropout


def install(model: nn.Module) -> int:
    """Re-class every ``nn.Dropout`` of ``model`` as :class:`PCGDropout`; returns
    how many modules it took over."""
    modules = [m for m in model.modules() if type(m) is nn.Dropout]
    for module in modules:
        module.__class__ = PCGDropout
    return len(modules)
