from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from nmt.data.vocab import BOS, EOS, PAD
from nmt.model.positions import sinusoids
from tests.helpers import random_batch, tiny_model


def test_positions_are_vaswanis_sinusoids():
    """PE(pos, 2i) = sin(pos / 10000^(2i/D)) and PE(pos, 2i+1) = cos(pos / 10000^(2i/D))
    (Vaswani et al. 2017, sec. 3.5)."""
    L, D = 60, 32
    pe = sinusoids(L, D)  # (L,D)
    for pos in range(L):
        for i in range(D // 2):
            angle = pos / 10000 ** (2 * i / D)
            assert abs(float(pe[pos, 2 * i]) - math.sin(angle)) < 1e-4, (pos, i)
            assert abs(float(pe[pos, 2 * i + 1]) - math.cos(angle)) < 1e-4, (pos, i)


def test_embedding_scales_tokens_by_sqrt_d_and_adds_each_steps_position():
    """x_t = sqrt(D)·E[y_t] + PE(t) (Vaswani et al. 2017, sec. 3.4), at the step's own
    position when decoded one step at a time."""
    model = tiny_model().eval()
    raw = model.tgt_embed.tokens(random_batch([6]))  # (1,6,D)
    D = raw.size(-1)
    want = raw * math.sqrt(D) + sinusoids(6, D)
    torch.testing.assert_close(model.tgt_embed(raw), want)
    torch.testing.assert_close(model.tgt_embed(raw[:, 4:5], offset=4), want[:, 4:5])


def test_padding_does_not_change_real_positions():
    model = tiny_model().eval()
    src = random_batch([7, 15])
    tgt = random_batch([5, 9])
    both = model(src, tgt)
    alone = model(src[:1, :7], tgt[:1, :5])
    torch.testing.assert_close(both[:1, :5], alone, atol=1e-5, rtol=1e-5)


def test_decoder_is_causal():
    model = tiny_model().eval()
    src = random_batch([6])
    tgt = random_batch([8])
    changed = tgt.clone()
    changed[0, 5:] = torch.randint(4, 40, (3,))
    torch.testing.assert_close(model(src, tgt)[:, :5], model(src, changed)[:, :5])


def test_tied_embeddings_share_storage():
    model = tiny_model()
    assert model.output.weight is model.tgt_embed.tokens.weight
    assert model.src_embed is model.tgt_embed


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_overfits_a_handful_of_pairs():
    torch.manual_seed(0)
    model = tiny_model()
    src = random_batch([5, 6, 7, 4])
    body = random_batch([4, 6, 5, 3])
    tgt_in = torch.cat([torch.full((4, 1), BOS), body], 1)
    tgt_out = torch.cat([body, torch.full((4, 1), PAD)], 1)
    for i, n in enumerate([4, 6, 5, 3]):
        tgt_out[i, n] = EOS
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(150):
        loss = F.cross_entropy(
            model(src, tgt_in).flatten(0, 1), tgt_out.flatten(), ignore_index=PAD
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.05
    model.eval()
    assert (model(src, tgt_in).argmax(-1)[tgt_out != PAD] == tgt_out[tgt_out != PAD]).all()
