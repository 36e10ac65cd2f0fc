"""An exponential moving average of the weights (``train.ema``), the weights that
validation scores and checkpoints hold.

After every update, each parameter's average θ̄ moves toward the trained weights θ:
θ̄ ← d·θ̄ + (1 − d)·θ, with d = ``train.ema`` (the average of the last ~1/(1 − d)
updates, weighted toward the newest). Averaging the iterates of a noisy optimiser
goes back to Polyak & Juditsky 1992 ("Acceleration of stochastic approximation by
averaging"); Marian trains NMT with it as "exponential smoothing" (Junczys-Dowmunt
et al. 2018), fairseq and timm as EMA. Until update ``train.ema_start`` the average
is the weights themselves, so that it forgets the random initialisation.

The trainer validates the average (its dev BLEU chooses ``best.pt``) and saves it as
every checkpoint's ``model``, which translation, averaging and export read; a full
checkpoint (``last.pt``) keeps the trained weights beside it as
``training_weights``, so that a resume continues both exactly. Buffers (hard
attention's reward baseline) are not averaged: they are the model's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn


class WeightAverage:
    """The running average of ``model``'s parameters (a tied parameter once), on the
    model's device, in its dtype."""

    def __init__(self, model: nn.Module, decay: float, start: int = 0) -> None:
        self.decay, self.start = decay, start
        self.params = list(model.parameters())  # each tied parameter once
        index = {id(p): i for i, p in enumerate(self.params)}
        # every state_dict name of a parameter, tied ones under each of their names
        self.names = {
            name: index[id(p)] for name, p in model.named_parameters(remove_duplicate=False)
        }
        self.average = [p.detach().clone() for p in self.params]

    @torch.no_grad()
    def update(self, step: int) -> None:
        """Move the average toward the weights after update ``step`` (1-based)."""
        weight = 1.0 if step <= self.start else 1.0 - self.decay
        for avg, p in zip(self.average, self.params, strict=True):
            avg.lerp_(p, weight)

    @contextmanager
    @torch.no_grad()
    def applied(self) -> Iterator[None]:
        """The model holds the average inside; its trained weights come back after,
        bit for bit."""
        trained = [p.detach().clone() for p in self.params]
        for p, avg in zip(self.params, self.average, strict=True):
            p.copy_(avg)
        try:
            yield
        finally:
            for p, w in zip(self.params, trained, strict=True):
                p.copy_(w)

    def state_dict(self, trained: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The model's ``trained`` state dict with the average in place of every
        parameter (buffers as they are)."""
        at = self.names
        return {k: self.average[at[k]] if k in at else v for k, v in trained.items()}

    @torch.no_grad()
    def load(self, averaged: dict[str, torch.Tensor]) -> None:
        """Take the average from a checkpoint's ``model`` (:meth:`state_dict`'s)."""
        for name, i in self.names.items():
            self.average[i].copy_(averaged[name])
