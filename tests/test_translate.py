"""``translate`` emits exactly one line per input line, whatever the input."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nmt.data.corpus import decode_lines, read_lines
from nmt.data.vocab import Vocab
from nmt.decoding import DecodeConfig, translate_lines
from nmt.translate import format_output
from tests.helpers import tiny_model


@pytest.fixture(scope="module")
def system(toy_dir):
    lines = read_lines(toy_dir / "train.src") + read_lines(toy_dir / "train.tgt")
    vocab = Vocab.train([*lines, "ünïcödé 中文 русский العربية"], size=120, model_type="unigram")
    torch.manual_seed(0)
    model = tiny_model()
    model.generator = torch.nn.Linear(32, len(vocab), bias=False)
    model.tgt_embed.tokens = torch.nn.Embedding(len(vocab), 32, padding_idx=1)
    model.src_embed = model.tgt_embed
    model.cfg = dataclasses.replace(model.cfg, max_positions=64)
    return model.eval(), vocab


# Anything but the line feed itself: CR, U+2028, NEL, control characters, emoji...
line = st.text(st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=80)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(line, max_size=6))
def test_one_output_line_per_input_line(system, lines):
    model, vocab = system
    raw = "".join(x + "\n" for x in lines).encode("utf-8")
    inputs = decode_lines(raw, "<stdin>")
    cfg = DecodeConfig(beam=2, max_len_a=0.0, max_len_b=6)
    out = format_output(
        translate_lines(model, vocab, vocab, inputs, cfg, torch.device("cpu")), None
    )
    assert len(inputs) == len(lines)  # a trailing CR (CRLF) is dropped, never a line
    assert out.count("\n") == len(inputs) and (out == "" or out.endswith("\n"))
    for src, hyp in zip(inputs, out.split("\n")):
        if src == "":
            assert hyp == ""
