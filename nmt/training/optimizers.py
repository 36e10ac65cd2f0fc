"""The optimiser of ``train.optimizer``: Adam, or Muon for the layers' weight matrices
beside Adam for the rest.

Muon (Jordan et al. 2024, "Muon: an optimizer for hidden layers"; PyTorch's
``torch.optim.Muon``) replaces each update of a weight matrix by the nearest
orthogonal matrix of its momentum (Newton-Schulz iterations), scaled so that its
RMS matches AdamW's (Liu et al. 2025, "Muon is scalable for LLM training"), which
lets it take AdamW's learning rate. It is meant for the matrices inside the
network: here every linear layer's weight but the output layer's, including
self-attention's fused q, k, v projection (one 3D×D matrix, where the reference
implementations take Q, K and V apart) and the variants' own linear layers
(local_p's and local_s's centre predictor W_p); the embeddings (and the output
layer tied to them), the position tables, norms, biases and the variants' other
parameters (local_p's v_p, the score weights) stay with Adam, as in the nanoGPT
speedrun that made it known. Splitting q, k, v into three blocks and giving W_p to
Adam were each tried on the shipped recipe and moved dev BLEU by no more than a
seed does (docs/benchmarks.md, "What Muon orthogonalises").

Each parameter group keeps its peak rate; at every update the trainer sets each
group's rate from its own peak through the schedule (:meth:`Optimizers.set_lr`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from nmt.model.seq2seq import Transformer
from nmt.setup.training import TrainConfig


def adam(params: list[nn.Parameter], t: TrainConfig, lr: float) -> torch.optim.Adam:
    """Adam with the recipe's settings, fused: one kernel per parameter instead of a
    dozen passes over it, on the CPU and CUDA (docs/benchmarks.md has the cost)."""
    return torch.optim.Adam(
        params, lr=lr, betas=tuple(t.betas), eps=t.eps, weight_decay=t.weight_decay, fused=True
    )


def matrices(model: Transformer) -> list[nn.Parameter]:
    """The weight matrices of the model's linear layers, the output layer left out
    (tied to the target embeddings, which stay with Adam)."""
    return [m.weight for m in model.modules() if isinstance(m, nn.Linear) and m is not model.output]


def optimizers(model: Transformer, t: TrainConfig) -> Optimizers:
    """``train.optimizer``: Adam for every parameter, or Muon for the matrices and
    Adam for the rest."""
    if t.optimizer == "adam":
        return Optimizers([adam(list(model.parameters()), t, t.lr)])
    muon = matrices(model)
    chosen = {id(p) for p in muon}
    rest = [p for p in model.parameters() if id(p) not in chosen]
    orthogonal = torch.optim.Muon(
        muon,
        lr=t.muon_lr or t.lr,
        weight_decay=t.weight_decay,
        momentum=t.muon_momentum,
        adjust_lr_fn="match_rms_adamw",
    )
    return Optimizers([orthogonal, adam(rest, t, t.lr)])


class Optimizers:
    """Optimisers stepped as one (Adam alone, or Muon and Adam), each group at its
    own peak rate through the schedule."""

    def __init__(self, parts: list[torch.optim.Optimizer]) -> None:
        self.parts = parts
        self.peaks = [group["lr"] for group in self.param_groups]

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return [g for part in self.parts for g in part.param_groups]

    def set_lr(self, schedule: Callable[[float], float]) -> None:
        """Every group at the rate the schedule gives for its own peak."""
        for group, peak in zip(self.param_groups, self.peaks):
            group["lr"] = schedule(peak)

    def step(self) -> None:
        for part in self.parts:
            part.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for part in self.parts:
            part.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        """Each part's state dict, in order (checkpoint format 3; an earlier one is
        upgraded by nmt.setup.migrations)."""
        return {"parts": [part.state_dict() for part in self.parts]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        states = state.get("parts")
        if not isinstance(states, list):
            raise ValueError("the checkpoint's optimiser state has no list of parts")
        if len(states) != len(self.parts):
            raise ValueError(
                f"the checkpoint holds {len(states)} optimiser(s), train.optimizer "
                f"{len(self.parts)}"
            )
        for part, own in zip(self.parts, states):
            part.load_state_dict(own)
