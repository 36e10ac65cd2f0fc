"""Local attention's banded path against its dense equations: the same weights,
context and gradients, every query in one block with its window in the band,
and ``auto`` taking the bands only where they pay."""

from __future__ import annotations

import shutil

import pytest
import torch

from nmt.attention import bands as banded
from tests.attention.test_attention import H, build
from tests.attention.test_local import LOCAL, run


@pytest.mark.parametrize(("kind", "options"), LOCAL)
def test_windowed_and_dense_paths_agree(kind, options):
    torch.manual_seed(0)
    windowed = build(kind, window=3, path="windowed", **options)
    dense = build(kind, window=3, path="dense", **options)
    dense.load_state_dict(windowed.state_dict())
    lengths, T = (120, 77), 90
    a, b = run(windowed, lengths, T), run(dense, lengths, T)
    torch.testing.assert_close(a.context, b.context, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a.weights, b.weights, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("spread", [0, 3, 40, 500])
def test_tiled_blocks_hold_every_query_once_with_its_window_in_the_band(spread):
    """local_p's blocks for centres in any order, clustered (spread 0) or scattered."""
    attn = build("local_p", window=3)
    C = attn.width
    torch.manual_seed(spread)
    lo = torch.randint(-3, spread + 1, (2, H, 300)) + torch.randint(0, 40, (2, 1, 1))
    blocks = banded.tiled_blocks(lo, C)
    n = blocks.start.size(-1)
    for b in range(2):
        for h in range(H):
            slots = blocks.slot[b, h]
            assert len(set(slots.tolist())) == 300 and slots.min() >= 0 and slots.max() < n * C
            start = blocks.start[b, h, slots // C]  # each query's band
            assert (lo[b, h] >= start).all()
            assert (lo[b, h] + C <= start + blocks.length).all()  # the window ends inside
            tiles = torch.div(lo[b, h], C, rounding_mode="floor").unique().numel()
            assert n <= -(-300 // C) + tiles
    assert blocks.length == 2 * C - 1


@pytest.mark.parametrize(("kind", "options"), LOCAL)
def test_windowed_and_dense_paths_give_the_same_gradients(kind, options):
    torch.manual_seed(0)
    windowed = build(kind, window=3, path="windowed", **options).train()
    dense = build(kind, window=3, path="dense", **options).train()
    dense.load_state_dict(windowed.state_dict())
    for attn in (windowed, dense):
        run(attn, (120, 77), 90, need_weights=False).context.pow(2).sum().backward()
    for (name, a), b in zip(windowed.named_parameters(), dense.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_auto_path_uses_the_band_only_for_long_sources(monkeypatch):
    attn = build("local_m", window=2)
    calls = []
    original = banded._attend
    monkeypatch.setattr(banded, "_attend", lambda *a: calls.append(1) or original(*a))
    run(attn, (12, 12), 12)
    assert not calls
    run(attn, (400, 400), 400)
    assert calls


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cc") is None, reason="torch.compile needs a C compiler")
def test_local_ps_tiled_bands_compile_to_the_eager_gradients():
    """``train.compile`` on local_p: the graph before the band's width is read (its
    tiles, each query's rank in its tile) once crashed inductor's CPU code generation
    (exit 1 in nmt train for every local_p recipe); compiled, the gradients are
    eager's."""
    torch.manual_seed(0)
    eager = build("local_p", window=3, path="windowed").train()
    compiled = build("local_p", window=3, path="windowed").train()
    compiled.load_state_dict(eager.state_dict())
    compiled.forward = torch.compile(compiled.forward, dynamic=True)
    for attn in (eager, compiled):
        run(attn, (120, 77), 90, need_weights=False).context.pow(2).sum().backward()
    for (name, a), b in zip(eager.named_parameters(), compiled.parameters(), strict=True):
        torch.testing.assert_close(b.grad, a.grad, atol=1e-5, rtol=1e-4, msg=name)
