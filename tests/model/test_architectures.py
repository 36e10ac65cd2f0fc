"""Trilinear scores, BiDAF fusion, QANet encoder blocks and the two-stream decoder."""

from __future__ import annotations

import pytest
import torch

from nmt.attention import ATTENTION
from nmt.attention.base import Context, DotScore, TrilinearScore, merge_heads, split_heads
from nmt.data.vocab import BOS, PAD
from nmt.errors import ConfigError
from nmt.model import two_stream
from nmt.model.qanet import QANetBlock
from nmt.setup.config import from_dict
from nmt.setup.model import DECODERS, ENCODER_BLOCKS, DecoderConfig, EncoderConfig, ModelConfig
from tests.attention.test_attention import build, inputs
from tests.helpers import VOCAB, random_batch, tiny_model

QANET = {"encoder": {"block": "qanet", "kernel": 3, "convs": 2}}
TWO_STREAM = {"decoder": {"kind": "two_stream"}}
RANDOM_ORDER = {"decoder": {"kind": "two_stream", "order": "random"}}
FUSED_RANDOM_ORDER = {"decoder": {"kind": "two_stream", "order": "random", "fusion": "bidaf"}}
# (model overrides, attention options): each new option alone and combined
ARCHITECTURES = {
    "trilinear": ({}, {"score": "trilinear"}),
    "bidaf": ({"decoder": {"fusion": "bidaf"}}, {}),
    "qanet": (QANET, {}),
    "two_stream": (TWO_STREAM, {}),
    "two_stream+bidaf": (
        {"decoder": {"kind": "two_stream", "fusion": "bidaf"}},
        {"score": "trilinear"},
    ),
    "groups": ({"decoder": {"group_layers": 1}}, {}),
    "groups+bidaf": ({"decoder": {"group_layers": 2, "fusion": "bidaf"}}, {"score": "trilinear"}),
}


def window(kind: str) -> dict:
    return {"window": 2} if kind.startswith("local") else {}


def differentiable(kind: str) -> dict:
    """Options under which the context itself carries the score's gradient."""
    return {"estimator": "straight_through"} if kind == "hard" else window(kind)


def target(lengths: list[int]) -> torch.Tensor:
    B = len(lengths)
    return torch.cat([torch.full((B, 1), BOS), random_batch(lengths)], 1)


@pytest.mark.parametrize(
    ("registry", "base", "section", "key", "built_in"),
    [
        (ENCODER_BLOCKS, EncoderConfig, "encoder", "block", {"transformer", "qanet"}),
        (DECODERS, DecoderConfig, "decoder", "kind", {"standard", "two_stream"}),
    ],
)
def test_each_block_and_decoder_reads_its_own_config(registry, base, section, key, built_in):
    assert built_in <= set(registry.names())
    for name in registry.names():
        cfg = from_dict(ModelConfig, {section: {key: name}})
        part = getattr(cfg, section)
        assert isinstance(part, registry.config(name)) and issubclass(type(part), base)
        assert getattr(part, key) == name


# ------------------------------------------------------------------ trilinear


def test_trilinear_is_bidaf_similarity_up_to_a_per_query_constant():
    torch.manual_seed(0)
    H, Dh = 3, 8
    score = TrilinearScore(H, Dh)
    with torch.no_grad():
        score.w_k.normal_()
        score.w_m.normal_()
    w_q = torch.randn(H, Dh)
    for extra in [(), (5,)]:  # plain (B,H,T,Dh) and blocked (B,H,n,C,Dh) layouts
        q = torch.randn(2, H, *extra, 4, Dh)
        k = torch.randn(2, H, *extra, 7, Dh)
        full = torch.zeros(2, H, *extra, 4, 7)
        for h in range(H):
            qh, kh = q[:, h], k[:, h]  # (B,*,T,Dh), (B,*,S,Dh)
            full[:, h] = (
                (qh @ w_q[h]).unsqueeze(-1)
                + (kh @ score.w_k[h]).unsqueeze(-2)
                + (qh * score.w_m[h]) @ kh.transpose(-1, -2)
            )
        ours = score(q, k)
        assert ours.shape == full.shape
        # w_qᵀq is constant over source positions: the difference is constant per row
        diff = full - ours.detach()
        torch.testing.assert_close(diff, diff[..., :1].expand_as(diff))
        torch.testing.assert_close(ours.softmax(-1), full.softmax(-1), atol=1e-6, rtol=1e-5)


def test_bidaf_fusion_uses_the_full_trilinear_score():
    """The fusion's softmax runs over target positions, where w_qᵀq differs from one
    position to the next: its summary follows Seo et al.'s eq. 1 with every term (the
    score leaves w_qᵀq out; the fusion owns w_q and adds it back)."""
    from nmt.attention.fusion import BiDAFFusion

    torch.manual_seed(0)
    H, D = 4, 32
    attn = build("global", score="trilinear")
    fusion = BiDAFFusion(attn, D)
    s = attn.score
    with torch.no_grad():
        for p in (fusion.query_term, s.w_k, s.w_m):
            p.normal_()
    h = torch.randn(2, 6, D)
    _, memory, src_mask, positions = inputs(lengths=(9, 4))
    mem = attn.project_memory(memory, src_mask)
    attended = attn(h, mem, Context(positions))
    q = attn.queries(h)  # (B,H,T,Dh)
    full = (
        torch.einsum("bhtd,hd->bht", q, fusion.query_term).unsqueeze(-1)
        + torch.einsum("bhsd,hd->bhs", mem.key, s.w_k).unsqueeze(-2)
        + torch.einsum("bhtd,hd,bhsd->bhts", q, s.w_m, mem.key)
    )  # (B,H,T,S)
    m = full.masked_fill(~src_mask.unsqueeze(1), float("-inf")).amax(-1)  # (B,H,T)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    b = m.unsqueeze(-2).expand(2, H, 6, 6).masked_fill(~causal, float("-inf")).softmax(-1)
    summary = merge_heads(b @ split_heads(h, H))  # (B,T,D)
    context = attended.context
    want = fusion.proj(torch.cat([h, context, h * context, h * summary], -1))
    got = fusion(h, attended, attn, mem, Context(positions)).context
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_fusion_adds_a_query_term_only_to_a_score_that_omits_one():
    from nmt.attention.fusion import BiDAFFusion

    assert BiDAFFusion(build("global", score="trilinear"), 32).query_term is not None
    for score in ("dot", "general", "concat"):
        assert BiDAFFusion(build("global", score=score), 32).query_term is None


def test_trilinear_starts_as_the_scaled_dot_product():
    q, k = torch.randn(2, 4, 5, 8), torch.randn(2, 4, 6, 8)
    torch.testing.assert_close(TrilinearScore(4, 8)(q, k), DotScore(4, 8)(q, k))


@pytest.mark.parametrize("kind", ATTENTION.names())
def test_every_variant_takes_the_trilinear_score(kind):
    attn = build(kind, score="trilinear", **differentiable(kind))
    query, memory, src_mask, pos = inputs(lengths=(9, 4))
    out = attn(query, attn.project_memory(memory, src_mask), Context(pos, need_weights=True))
    assert (out.weights[1, :, :, 4:] == 0).all() and torch.isfinite(out.context).all()
    attn.train()
    out = attn(query, attn.project_memory(memory, src_mask), Context(pos))
    out.context.square().sum().backward()
    assert attn.score.w_m.grad is not None and attn.score.w_m.grad.abs().sum() > 0


# ---------------------------------------------------- every new architecture


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_no_future_target_token_leaks(name):
    """Perturbing target inputs from position 5 on leaves the logits at 0..4 alone
    (for BiDAF fusion: the query-to-context summary is causal)."""
    overrides, options = ARCHITECTURES[name]
    torch.manual_seed(0)
    model = tiny_model(model=overrides, **options).eval()
    src, tgt = random_batch([6, 9]), target([9, 9])
    changed = tgt.clone()
    changed[:, 5:] = torch.randint(4, VOCAB, (2, 5))
    torch.testing.assert_close(model(src, tgt)[:, :5], model(src, changed)[:, :5])
    assert not torch.allclose(model(src, tgt)[:, 5:], model(src, changed)[:, 5:])


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_padding_does_not_change_real_positions(name):
    overrides, options = ARCHITECTURES[name]
    model = tiny_model(model=overrides, **options).eval()
    src, tgt = random_batch([7, 15]), target([5, 9])
    both = model(src, tgt)
    alone = model(src[:1, :7], tgt[:1, :6])
    torch.testing.assert_close(both[:1, :6], alone, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------- QANet


def qanet_block(survival: float = 1.0, layers: int = 2) -> list[QANetBlock]:
    cfg = from_dict(
        ModelConfig,
        {
            "d_model": 16,
            "heads": 2,
            "ffn": 32,
            "encoder_layers": layers,
            "dropout": 0.0,
            "encoder": {"block": "qanet", "convs": 3, "kernel": 5, "survival": survival},
        },
    )
    return [QANetBlock(cfg, i) for i in range(layers)]


def test_qanet_padding_contents_never_leak_through_the_convolutions():
    torch.manual_seed(0)
    block = qanet_block()[0].eval()
    x = torch.randn(2, 10, 16)
    keep = torch.ones(2, 10, 1, dtype=torch.bool)
    keep[0, 6:] = False
    bias = torch.zeros(2, 1, 1, 10).masked_fill(~keep.view(2, 1, 1, 10), -1e9)
    other = x.clone()
    other[0, 6:] = 100 * torch.randn(4, 16)  # new pad contents
    a, b = block(x, bias, keep), block(other, bias, keep)
    torch.testing.assert_close(a[0, :6], b[0, :6])
    torch.testing.assert_close(a[1], b[1])


def test_qanet_survival_decays_linearly_to_the_last_sub_layer():
    blocks = qanet_block(survival=0.6, layers=2)  # 5 sub-layers each, 10 in all
    probs = [p for b in blocks for p in b.survival]
    expected = [1 - (i + 1) / 10 * 0.4 for i in range(10)]
    assert probs == pytest.approx(expected) and probs[-1] == pytest.approx(0.6)


def test_qanet_layer_dropout_is_random_in_training_only():
    torch.manual_seed(0)
    block = qanet_block(survival=0.3)[1]
    x = torch.randn(1, 8, 16)
    keep = torch.ones(1, 8, 1, dtype=torch.bool)
    bias = torch.zeros(1, 1, 1, 8)
    block.eval()
    assert torch.equal(block(x, bias, keep), block(x, bias, keep))
    block.train()
    outs = {tuple(block(x, bias, keep).flatten()[:4].tolist()) for _ in range(20)}
    assert len(outs) > 1
    # all sub-layers dropped: the identity is among the outcomes
    torch.manual_seed(1)
    with torch.no_grad():
        assert any(torch.equal(block(x, bias, keep), x) for _ in range(200))


def test_qanet_kept_sub_layers_are_scaled_to_keep_the_expectation():
    """Each training draw of sub-layer j is x (dropped) or x + branch / p_j (kept), kept
    with probability p_j: the mean is x + branch, what inference computes."""
    torch.manual_seed(0)
    block = qanet_block(survival=0.3)[1].train()
    j, p = 2, block.survival[2]
    x, branch = torch.randn(1, 4, 16), torch.randn(1, 4, 16)
    draws = torch.stack([block._residual(x, branch, j) for _ in range(4000)])
    kept = ~torch.isclose(draws, x).all(-1).all(-1).squeeze(-1)  # (draws,)
    torch.testing.assert_close(draws[kept], (x + branch / p).expand_as(draws[kept]))
    assert float(kept.float().mean()) == pytest.approx(p, abs=0.025)
    torch.testing.assert_close(draws.mean(0), x + branch, atol=0.15, rtol=0)


def test_qanet_sub_layers_take_their_own_survival_in_order():
    """Convolutions, self-attention, feed-forward: sub-layers 0 .. convs + 1."""
    block = qanet_block(survival=0.5)[0].train()
    seen = []
    original = block._residual
    block._residual = lambda x, branch, j: seen.append(j) or original(x, branch, j)
    block(torch.randn(1, 8, 16), torch.zeros(1, 1, 1, 8), torch.ones(1, 8, 1, dtype=torch.bool))
    assert seen == [0, 1, 2, 3, 4]


# ----------------------------------------------------------------- two-stream


def fixed_order(rank: torch.Tensor):
    """A stand-in for random_order that returns ``rank`` (B,T) for the content."""

    def order(real):
        B, T = real.shape
        after = torch.full((B, 1), T, dtype=rank.dtype)
        return rank, torch.cat([rank[:, 1:], after], 1)

    return order


@pytest.mark.parametrize("seed", range(4))
def test_random_order_outputs_do_not_depend_on_padding(seed):
    """One sentence alone and with two padding slots, under the same random order of
    its real slots (one sentence draws the same first n keys either way): every
    real query's output is the same, the EOS query's included."""
    torch.manual_seed(0)
    model = tiny_model(model=FUSED_RANDOM_ORDER).train()  # dropout is 0
    src, tgt = random_batch([6]), target([5])  # (1,6): BOS + 5 tokens
    padded = torch.cat([tgt, torch.full((1, 2), PAD)], 1)  # (1,8)
    torch.manual_seed(seed)
    alone = model(src, tgt)[0]  # (6,V)
    torch.manual_seed(seed)
    with_padding = model(src, padded)[0, :6]
    torch.testing.assert_close(with_padding, alone, atol=1e-5, rtol=1e-5)


def test_random_order_puts_padding_after_every_real_slot():
    real = torch.tensor([[True] * 4 + [False] * 3, [True] * 7])
    for _ in range(20):
        rank, qrank = two_stream.random_order(real)
        assert rank[0, 0] == rank.min()  # BOS first
        assert rank[0, :4].max() < rank[0, 4:].min()  # padding after the real slots
        assert qrank[0, 3] > rank[0, :4].max()  # the EOS query after every real slot
        assert sorted(rank[1].tolist()) == list(range(7))


def test_two_stream_random_order_hides_the_predicted_token_and_later_ones(monkeypatch):
    torch.manual_seed(0)
    model = tiny_model(model=FUSED_RANDOM_ORDER).train()  # dropout is 0
    T = 7
    rank = torch.tensor([[-1, 4, 0, 5, 2, 3, 1]])  # content positions 0..6
    monkeypatch.setattr(two_stream, "random_order", fixed_order(rank))
    src, tgt = random_batch([6]), target([T - 1])
    base = model(src, tgt)[0]  # (T,V)
    qrank = torch.cat([rank[0, 1:], torch.tensor([T])])
    for j in range(T):  # query j predicts position j + 1
        for p in range(1, T):
            changed = tgt.clone()
            changed[0, p] = (tgt[0, p] - 4 + 1) % (VOCAB - 4) + 4
            moved = not torch.allclose(model(src, changed)[0, j], base[j])
            assert moved == bool(rank[0, p] < qrank[j]), (j, p)


def test_two_stream_masks_are_xlnets(monkeypatch):
    """Two-stream attention (Yang et al. 2019, sec. 2.3) in the order's ranks r (content)
    and q (queries; query j predicts position j + 1), padding never a key: the content
    stream at p sees r(p') <= r(p), itself included; the query stream at j sees the
    content with r(p) < q(j); BiDAF's summaries see what their stream sees, the query
    stream's the queries with q(j') <= q(j)."""
    model = tiny_model(model=RANDOM_ORDER)
    rank = torch.tensor([[0, 4, 1, 3, 2, 5, 6], [0, 2, 3, 1, 4, 5, 6]])
    real = torch.tensor([[True] * 5 + [False] * 2, [True] * 7])
    monkeypatch.setattr(two_stream, "random_order", fixed_order(rank))
    masks = model.decoder.masks(2, 7, 0, real, random=True)
    qrank = torch.cat([rank[:, 1:], torch.full((2, 1), 7)], 1)
    for b in range(2):
        for i in range(7):
            for k in range(7):
                key = bool(real[b, k])
                assert bool(masks.content[b, 0, i, k]) == (key and rank[b, k] <= rank[b, i])
                assert bool(masks.query[b, 0, i, k]) == (key and rank[b, k] < qrank[b, i])
                assert bool(masks.fusion_query[b, i, k]) == (key and qrank[b, k] <= qrank[b, i])
    assert torch.equal(masks.fusion_content, masks.content[:, 0])


def test_two_stream_left_to_right_has_no_other_order_in_training():
    torch.manual_seed(0)
    model = tiny_model(model=TWO_STREAM).train()
    src, tgt = random_batch([6, 4]), target([7, 7])
    torch.testing.assert_close(model(src, tgt), model.eval()(src, tgt))


def test_random_order_is_only_for_training():
    torch.manual_seed(0)
    model = tiny_model(model=RANDOM_ORDER)
    ltr = tiny_model(model=TWO_STREAM)
    ltr.load_state_dict(model.state_dict())
    src, tgt = random_batch([6, 4]), target([7, 7])
    torch.testing.assert_close(model.eval()(src, tgt), ltr.eval()(src, tgt))
    assert not torch.allclose(model.train()(src, tgt), ltr.eval()(src, tgt))


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ({"decoder": {"order": "random"}}, "model.decoder.order"),
        ({"encoder": {"kernel": 4}}, "model.encoder.kernel"),
        ({"encoder": {"survival": 0.0}}, "model.encoder.survival"),
        (
            {**RANDOM_ORDER, "attention": {"kind": "hard", "estimator": "reinforce"}},
            "model.decoder.order",
        ),
    ],
)
def test_bad_architecture_options_name_the_key(model, key):
    with pytest.raises(ConfigError) as e:
        from_dict(ModelConfig, model, "model")
    assert key in str(e.value)
