"""Each module owns its initialisation: the model re-initialises linear weights only."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from nmt.attention import ATTENTION
from nmt.attention.base import SCORES
from nmt.data.vocab import PAD
from nmt.setup.model import DECODERS, ENCODER_BLOCKS
from tests.helpers import tiny_model

D, H = 32, 4


def own_parameters(module: nn.Module) -> dict[str, torch.Tensor]:
    """Parameters of ``module`` outside its nn.Linear layers (those the model re-inits)."""
    linear = {f"{name}.weight" for name, m in module.named_modules() if isinstance(m, nn.Linear)}
    return {n: p.detach() for n, p in module.named_parameters() if n not in linear}


def assert_initialised_alike(alone: nn.Module, in_model: nn.Module) -> None:
    """Every non-linear parameter of ``in_model`` is drawn as the module alone draws it:
    equal where the module sets a constant (identity, zeros), else the same spread."""
    expected, actual = own_parameters(alone), own_parameters(in_model)
    assert expected.keys() == actual.keys()
    for name, want in expected.items():
        got = actual[name]
        if want.numel() < 2 or want.std() == 0:
            torch.testing.assert_close(got, want, msg=name)
        else:
            assert float(got.std()) == pytest.approx(float(want.std()), rel=0.35), name


def assert_xavier(model: nn.Module) -> None:
    for name, m in model.named_modules():
        if isinstance(m, nn.Linear) and m.weight is not model.tgt_embed.tokens.weight:
            fan_out, fan_in = m.weight.shape
            bound = math.sqrt(6 / (fan_in + fan_out))
            w = m.weight.detach()
            assert w.abs().max() <= bound, name
            assert float(w.std()) == pytest.approx(bound / math.sqrt(3), rel=0.2), name


CASES = [(kind, {}) for kind in ATTENTION.names()] + [
    ("global", {"score": score}) for score in SCORES.names()
]


@pytest.mark.parametrize(("kind", "options"), CASES)
def test_every_attention_variant_keeps_its_own_initialisation(kind, options):
    if kind == "local_m":
        options = {"center": "identity"}
    torch.manual_seed(0)
    model = tiny_model(kind, **options)
    assert_xavier(model)
    for layer in model.decoder:
        alone = ATTENTION.get(kind)(layer.cross_attn.cfg, D, H, dropout=0.0)
        assert_initialised_alike(alone, layer.cross_attn)


def test_local_p_centre_predictor_starts_small():
    """local_p asks for v_p ~ N(0, 0.02²), so every centre starts near S/2."""
    model = tiny_model("local_p")
    v = torch.cat([layer.cross_attn.center_v.detach().flatten() for layer in model.decoder])
    assert 0.014 < float(v.std()) < 0.026


@pytest.mark.parametrize(
    "overrides",
    [
        {"decoder": {"kind": "two_stream"}},
        {"encoder": {"block": "qanet", "kernel": 3}},
    ],
)
def test_encoder_blocks_and_decoders_keep_their_own_initialisation(overrides):
    torch.manual_seed(0)
    model = tiny_model(model=overrides)
    assert_xavier(model)
    cfg = model.cfg
    assert_initialised_alike(DECODERS.get(cfg.decoder.kind)(cfg), model.decoder)
    block = ENCODER_BLOCKS.get(cfg.encoder.block)
    for i, layer in enumerate(model.encoder):
        assert_initialised_alike(block(cfg, i), layer)


@pytest.mark.parametrize("init", ["normal", "xavier"])
def test_embeddings_keep_their_own_initialisation(init):
    """``normal``: N(0, D^-½) (Vaswani et al.; fairseq), whose tails pass Xavier's
    bound; ``xavier``: uniform within sqrt(6 / (V + D)) (JoeyNMT). PAD's row is zero."""
    torch.manual_seed(0)
    table = tiny_model(model={"embed_init": init}).tgt_embed.tokens.weight.detach()
    assert (table[PAD] == 0).all()
    real = torch.cat([table[:PAD], table[PAD + 1 :]])
    vocab, dim = table.shape
    bound = math.sqrt(6 / (vocab + dim))
    if init == "normal":
        assert float(real.std()) == pytest.approx(dim**-0.5, rel=0.15)
        assert float(real.abs().max()) > bound
    else:
        assert float(real.abs().max()) <= bound
        assert float(real.std()) == pytest.approx(bound / math.sqrt(3), rel=0.15)
