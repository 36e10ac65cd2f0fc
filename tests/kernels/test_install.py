"""``train.kernels``: ``auto`` installs the CPU kernels and the fused loss, ``off``
trains the plain PyTorch model; both compute the same loss and gradients."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

from nmt import kernels
from nmt.attention import ATTENTION, local
from nmt.kernels import gaussian
from nmt.kernels.dropout import PCGDropout
from nmt.training.run import prepare
from nmt.training.trainer import Trainer

ARCHITECTURES = {
    **{kind: {"attention": {"kind": kind}} for kind in ATTENTION.names()},
    "qanet": {"encoder": {"block": "qanet"}},
    "two_stream": {"decoder": {"kind": "two_stream", "order": "random"}},
    "bidaf": {"decoder": {"fusion": "bidaf"}},
}


def loss_and_grads(trainer: Trainer) -> tuple[float, list[torch.Tensor]]:
    batch = trainer.data.train.collate(trainer.data.train.epoch_batches(512, 0, 0)[0])
    trainer.model.train()
    torch.manual_seed(0)  # hard attention samples
    loss = trainer.loss(batch).total
    params = list(trainer.model.parameters())
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return float(loss.detach()), [
        torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)
    ]


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_off_and_auto_give_the_same_loss_and_gradients(name, tiny_config):
    """Dropout 0 here: the kernels' masks differ from PyTorch's by design (each
    kernel's own test compares the two under one mask)."""
    cfg = tiny_config(model={"dropout": 0.0, **ARCHITECTURES[name]}, train={"kernels": "off"})
    trainer = prepare(cfg, "cpu")
    off = loss_and_grads(trainer)
    assert kernels.install(trainer.model) > 0
    trainer.cfg = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, kernels="auto"))
    auto = loss_and_grads(trainer)
    assert auto[0] == pytest.approx(off[0], rel=1e-5)
    # up to float32 rounding: relative to the whole gradient, as some parameters'
    # exact gradient is 0 (a key bias shifts every score of a query alike)
    scale = torch.cat([g.flatten() for g in off[1]]).abs().max()
    for got, want in zip(auto[1], off[1]):
        torch.testing.assert_close(got, want, atol=1e-5 * scale, rtol=1e-4)


@pytest.mark.parametrize("setting", ["auto", "off"])
def test_the_trainer_installs_the_kernels_only_under_auto(setting, tiny_config):
    trainer = prepare(tiny_config(train={"kernels": setting}), "cpu")
    kinds = {type(m) for m in trainer.model.modules()} & {nn.Dropout, PCGDropout}
    assert kinds == ({PCGDropout} if setting == "auto" else {nn.Dropout})


def test_installing_keeps_parameter_names_and_values(tiny_config):
    trainer = prepare(tiny_config(train={"kernels": "off"}), "cpu")
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    kernels.install(trainer.model)
    after = trainer.model.state_dict()
    assert list(after) == list(before)
    assert all(torch.equal(after[k], v) for k, v in before.items())


def test_install_gives_local_p_the_hand_written_gradient(tiny_config):
    """``off`` keeps the equations of nmt.attention.local; ``auto`` swaps in the
    same function with its own backward (tests/kernels/test_gaussian.py)."""
    cfg = tiny_config(model={"attention": {"kind": "local_p"}}, train={"kernels": "off"})
    model = prepare(cfg, "cpu").model
    assert {layer.cross_attn.gaussian for layer in model.decoder} == {local.gaussian_window}
    kernels.install(model)
    assert {layer.cross_attn.gaussian for layer in model.decoder} == {gaussian.gaussian_window}
