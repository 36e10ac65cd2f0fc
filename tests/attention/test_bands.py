"""Local attention's banded path against its dense equations: the same weights,
context and gradients, every query in one block with its window in the band,
and ``auto`` taking the bands only where they pay."""

from __future__ import annotations

import pytest
import torch

from nmt.attention import bands as banded
from nmt.attention.base import Context
from tests.attention.test_attention import H, build
from tests.attention.test_local import LOCAL, inputs, run


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
    """local_p's blocks for centres in any order, clustered (spread 0) or scattered,
    some windows past either end of the source (they read nothing, wherever they
    sit); no more blocks than the bound that compiled code allocates."""
    attn = build("local_p", window=3)
    C, S = attn.width, spread + 40
    torch.manual_seed(spread)
    lo = torch.randint(-3, spread + 1, (2, H, 300)) + torch.randint(0, 40, (2, 1, 1))
    lo[:, :, :20] = torch.randint(-3 * C, S + 3 * C, (2, H, 20))  # some windows off the source
    blocks = banded.tiled_blocks(lo, C, S)
    n = blocks.start.size(-1)
    assert n <= banded.most_blocks(300, C, S)
    for b in range(2):
        for h in range(H):
            slots = blocks.slot[b, h]
            assert len(set(slots.tolist())) == 300 and slots.min() >= 0 and slots.max() < n * C
            start = blocks.start[b, h, slots // C]  # each query's band
            reads = (lo[b, h] + C > 0) & (lo[b, h] < S)  # a window holding a key
            assert (lo[b, h] >= start)[reads].all()
            assert (lo[b, h] + C <= start + blocks.length)[reads].all()  # the window ends inside
            tiles = torch.div(lo[b, h].clamp(1 - C, S - 1), C, rounding_mode="floor")
            assert n <= -(-300 // C) + tiles.unique().numel()
    assert blocks.length == 2 * C - 1


def test_the_bound_on_blocks_holds_where_every_tile_has_one_query_too_many():
    """The worst case for the bound: each tile that a window with a key can start in
    (−1 … ⌊(S − 1)/C⌋) holds C + 1 queries, so each makes two blocks."""
    C, S = 7, 30
    tiles = range(-1, (S - 1) // C + 1)
    lo = torch.tensor([[[t * C + j % C for t in tiles for j in range(C + 1)]]])
    lo = lo.clamp(1 - C, S - 1)
    blocks = banded.tiled_blocks(lo, C, S)
    assert blocks.start.size(-1) == 2 * len(tiles) <= banded.most_blocks(lo.size(-1), C, S)


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
@pytest.mark.parametrize(("kind", "options"), LOCAL)
def test_what_torch_compile_traces_is_one_graph_with_eager_weights(kind, options):
    """Traced by TorchDynamo (``fullgraph``: a host read of a block count or a band
    length would fail it), the banded path takes the bounds instead of measuring, and
    gives eager's context and weights (backend ``eager``: the graph run as traced,
    without code generation)."""
    torch._dynamo.reset()  # nothing another test compiled from the same code
    torch.manual_seed(0)
    attn = build(kind, window=3, path="windowed", **options)
    traced = build(kind, window=3, path="windowed", **options)
    traced.load_state_dict(attn.state_dict())
    traced.forward = torch.compile(traced.forward, backend="eager", fullgraph=True)
    a, b = run(attn, (120, 77), 90), run(traced, (120, 77), 90)
    torch.testing.assert_close(b.context, a.context, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(b.weights, a.weights, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("kind", "options"), [o for o in LOCAL if o[0] != "local_p"])
def test_a_run_of_queries_spans_no_more_keys_than_its_bound(kind, options):
    """local_m's and local_s's centres, at their fastest (local_s: steps of 0 or
    max_step): the band each run of C queries spans is at most ``band_length``."""
    torch.manual_seed(0)
    attn = build(kind, window=3, **options)
    if kind == "local_s":
        torch.nn.init.normal_(attn.center_v, 0.0, 5.0)  # steps of 0 or max_step
    query, memory, src_mask, pos = inputs((400, 300), 350)
    p = attn.centers(query, attn.project_memory(memory, src_mask), Context(pos))
    lo = torch.round(p.detach()).long() - attn.window
    blocks = banded.consecutive_blocks(lo, attn.width)  # measured
    assert blocks.length <= attn.band_length


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
