"""Properties every registered cross-attention variant must have."""

from __future__ import annotations

import pytest
import torch

from nmt.attention import ATTENTION
from nmt.attention.base import Context
from tests.helpers import attention_config

D, H = 32, 4


def build(kind: str, **options):
    cfg = attention_config(kind, **options)
    return ATTENTION.get(kind)(cfg, D, H, dropout=0.0).eval()


def global_twin(attn):
    """Global attention with ``attn``'s projections and score (its own extras, such as
    a centre predictor or a baseline, left out): the soft reference of a variant."""
    glob = build("global")
    missing, _ = glob.load_state_dict(attn.state_dict(), strict=False)
    assert not missing, missing
    return glob


def inputs(lengths=(9, 4), T=6):
    B, S = len(lengths), max(lengths)
    query = torch.randn(B, T, D)
    memory = torch.randn(B, S, D)
    src_mask = torch.zeros(B, 1, S, dtype=torch.bool)
    for b, n in enumerate(lengths):
        src_mask[b, 0, :n] = True
    return query, memory, src_mask, torch.arange(T)


@pytest.mark.parametrize("kind", ATTENTION.names())
def test_weights_are_a_distribution_over_real_source(kind):
    attn = build(kind)
    query, memory, src_mask, pos = inputs()
    out = attn(query, attn.project_memory(memory, src_mask), Context(pos, need_weights=True))
    w = out.weights
    assert w.shape == (2, H, 6, 9) and out.context.shape == (2, 6, D)
    assert (w >= 0).all()
    assert (w.masked_select(~src_mask.unsqueeze(1).expand_as(w)) == 0).all()
    if getattr(attn, "normalised", True):
        torch.testing.assert_close(w.sum(-1), torch.ones(2, H, 6))


@pytest.mark.parametrize("kind", ATTENTION.names())
def test_fully_masked_row_gives_no_nan(kind):
    attn = build(kind)
    query, memory, src_mask, pos = inputs()
    src_mask[1] = False
    for need in (False, True):
        out = attn(query, attn.project_memory(memory, src_mask), Context(pos, need_weights=need))
        assert torch.isfinite(out.context).all()
        if need:
            assert torch.isfinite(out.weights).all() and (out.weights[1] == 0).all()


@pytest.mark.parametrize("kind", ATTENTION.names())
def test_context_with_and_without_weights_agree(kind):
    attn = build(kind)
    query, memory, src_mask, pos = inputs()
    mem = attn.project_memory(memory, src_mask)
    a = attn(query, mem, Context(pos, need_weights=False)).context
    b = attn(query, mem, Context(pos, need_weights=True)).context
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_global_scores_normalise_and_learn(score):
    attn = build("global", score=score).train()
    query, memory, src_mask, pos = inputs()
    out = attn(query, attn.project_memory(memory, src_mask), Context(pos, need_weights=True))
    torch.testing.assert_close(out.weights.sum(-1), torch.ones(2, H, 6))
    out.context.sum().backward()
    assert all(p.grad is not None for p in attn.score.parameters())
