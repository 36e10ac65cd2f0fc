"""model.positions: every scheme under every attention kind and both decoders
(incremental = full decoding, padding changes no real position), each scheme's
equation, SHAPE's shifts in training only, and the one-line refusals."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest
import torch

from nmt.attention import ATTENTION
from nmt.attention.base import alibi_slopes
from nmt.model.positions import Rotary, sinusoids
from nmt.setup.config import ConfigError, from_dict
from nmt.setup.model import ModelConfig
from nmt.setup.plugins import import_plugins
from nmt.training.build import build
from nmt.training.run import train
from tests.helpers import assert_incremental_equals_full, random_batch, tiny_model

SCHEMES = {
    "sinusoidal": {},
    "learned": {"kind": "learned"},
    "rope": {"kind": "rope"},
    "alibi": {"kind": "alibi"},
    "relative": {"kind": "relative", "max_distance": 3},
    "sinusoidal+cross_alibi": {"cross_alibi": True, "ratio": 1.2},
    "shift": {"shift": 20},
}
DECODERS = {"standard": {}, "two_stream": {"decoder": {"kind": "two_stream"}}}


def model_with(kind: str, scheme: str, decoder: str = "standard", seed: int = 0):
    window = {"window": 2} if kind.startswith("local") else {}
    torch.manual_seed(seed)
    overrides = {"positions": SCHEMES[scheme], **DECODERS[decoder]}
    return tiny_model(kind, model=overrides, **window)


@pytest.mark.parametrize("cuts", [range(12), [0, 4, 6, 7, 11]], ids=["steps", "chunks"])
@pytest.mark.parametrize("decoder", list(DECODERS))
@pytest.mark.parametrize("scheme", list(SCHEMES))
@pytest.mark.parametrize("kind", ATTENTION.names())
def test_incremental_equals_full_under_every_scheme(kind, scheme, decoder, cuts):
    model = model_with(kind, scheme, decoder).eval()
    assert_incremental_equals_full(model, cuts)


@pytest.mark.parametrize("scheme", list(SCHEMES))
@pytest.mark.parametrize("kind", ATTENTION.names())
def test_padding_changes_no_real_position(kind, scheme):
    model = model_with(kind, scheme).eval()
    src, tgt = random_batch([7, 15]), random_batch([5, 9])
    with torch.no_grad():
        both = model(src, tgt)
        alone = model(src[:1, :7], tgt[:1, :5])
    torch.testing.assert_close(both[0, :5], alone[0], atol=1e-5, rtol=1e-4)


def test_rope_scores_depend_on_the_distance_only():
    """q at p against k at p' scores the same as q at p + c against k at p' + c."""
    torch.manual_seed(0)
    rope = Rotary(8)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)

    def score(p, p2):
        return float(rope.rotate(q, torch.tensor([p])) @ rope.rotate(k, torch.tensor([p2])).mT)

    assert score(3, 1) == pytest.approx(score(40, 38), abs=1e-4)
    assert score(3, 1) != pytest.approx(score(3, 2), abs=1e-4)
    # a rotation: norms are kept; position 0 leaves the vector as it is
    assert rope.rotate(q, torch.tensor([17])).norm() == pytest.approx(float(q.norm()), rel=1e-5)
    torch.testing.assert_close(rope.rotate(q, torch.tensor([0])), q)
    # pair i of position p turned by p·10000^(−2i/Dh) (Su et al. 2021, eq. 34)
    x = torch.tensor([1.0, 0.0] * 4).view(1, 1, 1, 8)
    turned = rope.rotate(x, torch.tensor([5]))[0, 0, 0]
    for i in range(4):
        angle = 5 * 10000 ** (-2 * i / 8)
        assert turned[2 * i] == pytest.approx(math.cos(angle), abs=1e-5)
        assert turned[2 * i + 1] == pytest.approx(math.sin(angle), abs=1e-5)


def test_alibi_adds_minus_slope_times_distance_and_relative_clips_it():
    model = tiny_model(model={"positions": {"kind": "alibi"}})
    layer = model.decoder[0].self_attn
    q = torch.randn(1, 4, 3, 8)
    bias = layer.positions.bias(q, torch.arange(2, 5), 6)  # queries at 2..4, keys 0..5
    slopes = alibi_slopes(4)
    assert slopes.tolist() == pytest.approx([2**-2, 2**-4, 2**-6, 2**-8])
    for h, i, j in itertools.product(range(4), range(3), range(6)):
        assert float(bias[0, h, i, j]) == pytest.approx(-float(slopes[h]) * abs(i + 2 - j))
    relative = tiny_model(model={"positions": {"kind": "relative", "max_distance": 2}})
    rel = relative.decoder[0].self_attn.positions
    bias = rel.bias(q, torch.arange(3), 6)  # (1,H,3,6)
    for i, j in itertools.product(range(3), range(6)):
        d = max(-2, min(2, j - i))
        want = (q[0, :, i] @ rel.keys[d + 2]) * 8**-0.5
        torch.testing.assert_close(bias[0, :, i, j], want)


def test_learned_positions_are_a_trained_table_and_the_others_add_none():
    learned = tiny_model(model={"positions": {"kind": "learned"}})
    table = learned.tgt_embed.positions.learned.weight  # (max_positions, D)
    raw = learned.tgt_embed.tokens(random_batch([6])).detach()
    torch.testing.assert_close(
        learned.tgt_embed.eval()(raw), raw * math.sqrt(raw.size(-1)) + table[:6]
    )
    assert any(n.endswith("positions.learned.weight") for n, _ in learned.named_parameters())
    for kind in ("rope", "alibi", "relative"):
        embed = tiny_model(model={"positions": {"kind": kind}}).tgt_embed.eval()
        torch.testing.assert_close(embed(raw), raw * math.sqrt(raw.size(-1)))


def test_shape_shifts_each_sequence_in_training_and_never_in_decoding():
    """SHAPE (Kiyono et al. 2021): in training each sequence's positions start at its
    own random offset k in 0..shift, x_t = sqrt(D)·E[y_t] + PE(k + t)."""
    model = tiny_model(model={"positions": {"shift": 50}, "dropout": 0.0})
    embed = model.tgt_embed
    raw = embed.tokens(random_batch([6] * 64)).detach()  # (64,6,D)
    D = raw.size(-1)
    pe = sinusoids(1024 + 50, D)
    torch.testing.assert_close(embed.eval()(raw), raw * math.sqrt(D) + pe[:6])
    torch.manual_seed(0)
    shifted = embed.train()(raw) - raw * math.sqrt(D)  # (64,6,D) the positions added
    offsets = set()
    for b in range(64):
        k = int((pe[:51, :] - shifted[b, 0]).abs().sum(-1).argmin())
        torch.testing.assert_close(shifted[b], pe[k : k + 6])
        offsets.add(k)
    assert len(offsets) > 20 and max(offsets) <= 50


@pytest.mark.parametrize("tie", [False, True], ids=["apart", "tied"])
@pytest.mark.parametrize("decoder", list(DECODERS))
@pytest.mark.parametrize("kind", ATTENTION.names())
def test_shape_draws_a_pairs_offsets_apart_or_tied(kind, decoder, tie):
    """In training, teacher forcing reads the source at positions k_s + i and the
    target at k_t + j: drawn apart, k_s and then k_t, each in 0..shift; tied
    (``model.positions.tie_shift``), one k for both, so that i − j is what the
    positions say. The same pass with those offsets given is the reference."""
    window = {"window": 2} if kind.startswith("local") else {}
    positions = {"positions": {"shift": 20, "tie_shift": tie}, **DECODERS[decoder]}
    torch.manual_seed(0)
    model = tiny_model(kind, model=positions, **window).train()
    src, tgt = random_batch([5, 7, 3, 6]), random_batch([6, 4, 6, 2])
    torch.manual_seed(1)
    states = model.states(src, tgt)[0]  # (B,T,D)
    torch.manual_seed(1)
    ks = torch.randint(0, 21, (4, 1))
    kt = ks if tie else torch.randint(0, 21, (4, 1))
    assert tie or not torch.equal(ks, kt)
    # what the model draws after the offsets (hard attention's samples) comes next here too
    torch.testing.assert_close(shifted(model, src, tgt, ks, kt), states)
    # another target offset is another pass: the offsets given are the ones read
    assert not torch.allclose(shifted(model, src, tgt, ks, kt + 1), states)


def shifted(model, src, tgt, ks, kt):
    """Teacher forcing with SHAPE's offsets given: source ks (B,1), target kt (B,1)."""
    memory, mask = model.encode(src, ks)
    return model.decode_states(tgt, model.decoder_state(memory, mask, src=src, shift=kt))[0]


@pytest.mark.parametrize("kind", ATTENTION.names())
def test_cross_alibi_penalises_the_distance_from_the_diagonal(kind):
    """Every variant adds −m_h·|s − min(t/r, S−1)| to its scores: with the same
    weights, the model's attention differs from the plain one's, and a variant's
    weights over a long source fall off away from t/r (global: its peak)."""
    plain = model_with(kind, "sinusoidal").eval()
    biased = model_with(kind, "sinusoidal+cross_alibi").eval()
    biased.load_state_dict(plain.state_dict())
    src, tgt = random_batch([30]), random_batch([12])
    with torch.no_grad():
        a = plain(src, tgt)
        b = biased(src, tgt)
    assert not torch.allclose(a, b)
    if kind == "global":
        layer = biased.decoder[0].cross_attn
        with torch.no_grad():
            layer.q_proj.weight.zero_()  # flat scores: the bias alone decides
            layer.q_proj.bias.zero_()
            memory, src_mask = biased.encode(src)
            state = biased.decoder_state(memory, src_mask)
            _, attention = biased.decode_states(tgt, state, need_weights=True)
        weights = attention[0][0].weights[0]  # (H,T,S)
        peaks = weights.argmax(-1)  # (H,T)
        want = torch.round(torch.arange(12) / 1.2).clamp(max=29)
        assert (peaks - want).abs().max() <= 1


@pytest.mark.parametrize(
    ("positions", "key"),
    [
        ({"kind": "rope"}, "model.positions.kind"),  # with an odd head size below
        ({"shift": -1}, "model.positions.shift"),
        ({"shift": 10**6}, "model.positions.shift"),
        ({"kind": "rope", "shift": 4}, "model.positions.shift"),
        ({"kind": "relative", "max_distance": 0}, "model.positions.max_distance"),
        ({"cross_alibi": True, "ratio": -1.0}, "model.positions.ratio"),
        ({"kind": "relative", "max_distance": 3, "shift": 2}, "model.positions.shift"),
        ({"tie_shift": True}, "model.positions.tie_shift"),  # with no shift to tie
    ],
)
def test_absurd_positions_are_refused_naming_the_key(positions, key):
    sizes = {"d_model": 30, "heads": 2} if positions.get("kind") == "rope" else {}
    with pytest.raises(ConfigError) as error:
        from_dict(ModelConfig, {"positions": positions, **sizes})
    assert str(error.value).startswith(key.removeprefix("model."))


def test_the_fixed_start_plug_in_adds_the_sinusoids_from_its_start_always(tiny_config):
    """recipes/plugins/fixed_start.py (the SHAPE study's plug-in): x_t = sqrt(D)·E[y_t]
    + PE(start + t) in training as in decoding, where SHAPE draws the start; it
    trains, and a start past the bound is refused naming the key."""
    root = Path(__file__).parents[2]
    import_plugins([str(root / "recipes" / "plugins" / "fixed_start.py")])
    positions = {"kind": "sinusoidal_from", "start": 30}
    model = tiny_model(model={"positions": positions, "dropout": 0.0})
    embed = model.tgt_embed
    raw = embed.tokens(random_batch([6] * 4)).detach()  # (4,6,D)
    D = raw.size(-1)
    pe = sinusoids(512 + 30, D)
    torch.testing.assert_close(embed.train()(raw), raw * math.sqrt(D) + pe[30:36])
    # decoding: an incremental step at position 2 reads PE(start + 2) on
    torch.testing.assert_close(embed.eval()(raw, offset=2), raw * math.sqrt(D) + pe[32:38])
    cfg = tiny_config(model={"positions": positions}, train={"max_steps": 2})
    assert train(cfg, device="cpu")["steps"] == 2
    with pytest.raises(ConfigError, match=r"^positions\.start"):
        from_dict(ModelConfig, {"positions": {**positions, "start": -1}})


@pytest.mark.parametrize("dim", [7, 8, 33])
def test_sinusoids_follow_the_formula_for_any_width(dim):
    """PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(p / 10000^(2i/d)); an
    odd width (a model of d_model 33) ends with a sine instead of failing to build."""
    pe = sinusoids(50, dim)
    for p in (0, 1, 17, 49):
        for j in range(dim):
            angle = p / 10000 ** ((j - j % 2) / dim)
            want = math.sin(angle) if j % 2 == 0 else math.cos(angle)
            assert pe[p, j].item() == pytest.approx(want, abs=1e-5), (p, j)


def test_a_model_of_odd_width_with_sinusoidal_positions_trains(tiny_config):
    cfg = tiny_config(model={"d_model": 33, "heads": 3}, train={"max_steps": 2})
    assert train(cfg, device="cpu")["steps"] == 2


def test_a_position_scheme_from_a_plug_in_is_one_class_and_one_registration_line(tiny_config):
    """tests/plugins/no_positions.py registers a scheme outside the package: a recipe
    names it, the model is built with what its hooks add (here nothing: the model
    cannot tell the order of a sentence's words), and it trains."""
    import_plugins([str(Path(__file__).parents[1] / "plugins" / "no_positions.py")])
    cfg = tiny_config(model={"positions": {"kind": "none"}}, train={"max_steps": 2})
    model, _, _ = build(cfg, print)
    assert not any("positions" in name for name, _ in model.named_parameters())
    model.eval()
    src = torch.tensor([[5, 6, 7, 2], [7, 6, 5, 2]])  # one sentence, words reversed
    memory, _ = model.encode(src)
    torch.testing.assert_close(memory[0].sum(0), memory[1].sum(0))
    assert train(cfg, device="cpu")["steps"] == 2
