"""Sentence groups (``model.decoder.group_layers``, G-Transformer): for every attention
kind, the lower layers give no weight outside the query's own sentence while the
upper ones read the whole input; one sentence reads as it would without groups; and
the recipe keys that cannot work with them are refused."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.attention import ATTENTION
from nmt.attention.base import SentenceGroups
from nmt.data.vocab import BOS, PAD
from nmt.errors import ConfigError
from nmt.setup.config import from_dict
from nmt.setup.model import ModelConfig
from nmt.setup.recipe import RunConfig
from tests.helpers import VOCAB, tiny_model

SEP = VOCAB - 1  # tiny_model's vocabularies: the separator is the last id


def paths(kind: str) -> list[dict]:
    """Local attention's dense and banded paths (window 2), others as they are."""
    if not kind.startswith("local"):
        return [{}]
    return [{"window": 2, "path": "dense"}, {"window": 2, "path": "windowed"}]


KINDS = [(kind, options) for kind in ATTENTION.names() for options in paths(kind)]
MODELS: dict[str, object] = {}


def grouped(kind: str, options: dict, layers: int = 1):
    """A model whose lowest ``layers`` of 2 decoder layers are sentence-group layers
    (built once per kind: hypothesis draws many inputs for each)."""
    key = f"{kind}{sorted(options.items())}{layers}"
    if key not in MODELS:
        torch.manual_seed(0)
        model = tiny_model(kind, model={"decoder": {"group_layers": layers}}, **options)
        MODELS[key] = model.eval()
    return MODELS[key]


def with_separators(length: int, where: list[int], generator: torch.Generator) -> torch.Tensor:
    """Ids in [4, SEP) with the separator at ``where`` (positions < length)."""
    ids = torch.randint(4, SEP, (length,), generator=generator)
    ids[[w for w in where if w < length]] = SEP
    return ids


@st.composite
def sentences(draw) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of two (source, target) pairs of one to four sentences each, padded."""
    seed = draw(st.integers(0, 2**16))
    g = torch.Generator().manual_seed(seed)
    src = torch.full((2, 24), PAD)
    tgt = torch.full((2, 22), PAD)
    for b in range(2):
        s, t = draw(st.integers(6, 24)), draw(st.integers(5, 21))
        cuts = st.lists(st.integers(1, 20), max_size=3, unique=True)
        src[b, :s] = with_separators(s, draw(cuts), g)
        tgt[b, 1 : t + 1] = with_separators(t, draw(cuts), g)
    tgt[:, 0] = BOS
    return src, tgt


def weights(model, src: torch.Tensor, tgt: torch.Tensor) -> list[torch.Tensor]:
    """Each decoder layer's cross-attention weights (B,H,T,S), teacher-forced."""
    with torch.no_grad():
        memory, src_mask = model.encode(src)
        state = model.decoder_state(memory, src_mask, src=src)
        _, attention = model.decode_states(tgt, state, need_weights=True)
    return [calls[0].weights for calls in attention]


def outside(src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
    """(B,1,T,S) True where a source position is in another sentence than the query."""
    source = SentenceGroups.of_source(src, SEP)
    target = SentenceGroups.of(source, (tgt == SEP).cumsum(1)).target
    return (source.unsqueeze(1) != target.unsqueeze(2)).unsqueeze(1)


@pytest.mark.parametrize(("kind", "options"), KINDS, ids=[f"{k}{o}" for k, o in KINDS])
@settings(max_examples=25, deadline=None)
@given(pair=sentences())
def test_group_layers_give_no_weight_outside_the_querys_sentence(kind, options, pair):
    src, tgt = pair
    model = grouped(kind, options)
    lower, upper = weights(model, src, tgt)
    elsewhere = outside(src, tgt)
    assert float((lower * elsewhere).abs().max()) == 0.0
    real = (tgt != PAD).view(2, 1, -1, 1) & (src != PAD).view(2, 1, 1, -1)  # (B,1,T,S)
    if kind in ("global", "sparsemax") and bool((elsewhere & real).any()):
        # the whole input above: no mask hides the other sentences (sparsemax may still
        # give them zero, so the weights are checked where the scores cannot vanish)
        assert kind == "sparsemax" or float((upper * elsewhere * real).sum()) > 0


def test_a_separator_ends_its_sentence_and_a_query_past_the_last_reads_the_last():
    src = torch.tensor([[5, 6, SEP, 7, SEP, 8, 9, PAD]])
    source = SentenceGroups.of_source(src, SEP)
    assert source.tolist() == [[0, 0, 0, 1, 1, 2, 2, 2]]
    tgt = torch.tensor([[BOS, 5, SEP, 6, SEP, 7, SEP, 8]])  # one sentence too many
    target = SentenceGroups.of(source, (tgt == SEP).cumsum(1)).target
    # the query whose input is a separator starts the next sentence; the 4th reads the 3rd
    assert target.tolist() == [[0, 0, 1, 1, 2, 2, 2, 2]]


@pytest.mark.parametrize(("kind", "options"), KINDS, ids=[f"{k}{o}" for k, o in KINDS])
def test_one_sentence_reads_as_it_would_without_groups(kind, options):
    """Inputs without a separator: every query is in the one sentence, so a group
    model computes what the same weights compute with no group layer."""
    torch.manual_seed(0)
    plain = tiny_model(kind, **options).eval()
    model = tiny_model(kind, model={"decoder": {"group_layers": 2}}, **options).eval()
    model.load_state_dict(plain.state_dict())
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, SEP, (3, 11), generator=g)
    tgt = torch.cat([torch.full((3, 1), BOS), torch.randint(4, SEP, (3, 9), generator=g)], 1)
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt), plain(src, tgt))


def test_a_group_model_asks_for_the_ids_it_counts_sentences_on():
    model = grouped("global", {})
    src = torch.tensor([[5, SEP, 6]])
    memory, src_mask = model.encode(src)
    with pytest.raises(ValueError, match="source ids"):
        model.decoder_state(memory, src_mask)
    state = model.decoder_state(memory, src_mask, src=src)
    with pytest.raises(ValueError, match="target ids"):
        model.decode_states(None, state, torch.zeros(1, 2, 32))


@pytest.mark.parametrize(
    ("model", "data", "decode", "key"),
    [
        (
            {"decoder": {"group_layers": 3}},
            {"join": {"prob": 0.5}},
            {},
            "model.decoder.group_layers",
        ),
        (
            {"decoder": {"group_layers": -1}},
            {"join": {"prob": 0.5}},
            {},
            "model.decoder.group_layers",
        ),
        (
            {"decoder": {"kind": "two_stream", "group_layers": 1}},
            {"join": {"prob": 0.5}},
            {},
            "model.decoder.group_layers",
        ),
        ({"decoder": {"group_layers": 1}}, {}, {}, "model.decoder.group_layers"),
        ({}, {}, {"split": "marks"}, "decode.split"),
    ],
)
def test_settings_that_cannot_work_are_refused_naming_the_key(model, data, decode, key):
    recipe = {
        "run_dir": "r",
        "data": {"dir": "d", "src_lang": "s", "tgt_lang": "t", **data},
        "model": {"decoder_layers": 2, **model},
        "decode": decode,
    }
    with pytest.raises(ConfigError) as e:
        from_dict(RunConfig, recipe)
    assert str(e.value).startswith(key), e.value


def test_the_layer_count_is_the_decoders_key():
    cfg = from_dict(ModelConfig, {"decoder_layers": 3, "decoder": {"group_layers": 2}})
    assert cfg.decoder.group_layers == 2
