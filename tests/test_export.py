"""``nmt export --format ctranslate2``: the exported model decodes as ``nmt`` does."""

from __future__ import annotations

import json

import pytest
import torch

from nmt.data.corpus import read_lines
from nmt.decoding import DecodeConfig, translate_lines
from nmt.errors import NmtError
from nmt.export import export_ctranslate2, inexpressible
from nmt.model.load import Loaded, load_model
from tests.conftest import require_extra
from tests.test_cli import invoke


@pytest.fixture(scope="module")
def exported(tiny_run, tmp_path_factory):
    require_extra("ctranslate2", "ctranslate2")
    out = tmp_path_factory.mktemp("export") / "ct2"
    result = invoke("export", tiny_run, "--format", "ctranslate2", "-o", out)
    assert result.exit_code == 0, result.output
    return out


def test_greedy_outputs_equal_nmt_translate_beam_1(exported, tiny_run, toy_dir):
    import ctranslate2
    import sentencepiece as spm

    lines = read_lines(toy_dir / "test.src")[:30]
    loaded = load_model(tiny_run, torch.device("cpu"))
    cfg = DecodeConfig(beam=1)
    ours = translate_lines(
        loaded.model, loaded.vocabs.src, loaded.vocabs.tgt, lines, cfg, torch.device("cpu")
    )
    translator = ctranslate2.Translator(str(exported), device="cpu")
    source = spm.SentencePieceProcessor(model_file=str(exported / "source.spm"))
    target = spm.SentencePieceProcessor(model_file=str(exported / "target.spm"))
    suppress = json.loads((exported / "nmt-export.json").read_text())["suppress_sequences"]
    for line, hyps in zip(lines, ours):
        pieces = source.encode(line, out_type=str)
        # nmt's limit a*S+b (S with </s>) counts the forced </s>; CTranslate2's does not.
        limit = int(cfg.max_len_a * (len(pieces) + 1) + cfg.max_len_b) - 1
        out = translator.translate_batch(
            [pieces], beam_size=1, max_decoding_length=limit, suppress_sequences=suppress
        )
        assert target.decode(out[0].hypotheses[0]) == hyps[0].text


def test_the_export_is_self_contained_and_atomic(exported, tiny_run):
    manifest = json.loads((exported / "nmt-export.json").read_text())
    assert manifest["format"] == "ctranslate2" and manifest["quantization"] == "float32"
    for name in ("model.bin", "config.json", "source.spm", "target.spm"):
        assert (exported / name).is_file()
    again = invoke("export", tiny_run, "-o", exported)
    assert again.exit_code == 2 and "exists and is not an empty directory" in again.output
    assert sorted(p.name for p in exported.parent.iterdir()) == ["ct2"]  # no temp left


def test_int8_weights_translate_every_line(exported, tiny_run, tmp_path):
    import ctranslate2

    out = tmp_path / "int8"
    assert invoke("export", tiny_run, "-o", out, "--quantization", "int8").exit_code == 0
    assert (out / "model.bin").stat().st_size < (exported / "model.bin").stat().st_size
    result = ctranslate2.Translator(str(out)).translate_batch([["▁a"], ["▁b", "▁c"]])
    assert len(result) == 2


@pytest.mark.parametrize(
    "model, key",
    [
        ({"attention": {"kind": "local_m"}}, "model.attention.kind is local_m"),
        ({"attention": {"kind": "global", "score": "general"}}, "model.attention.score is"),
        ({"attention": {"kind": "global", "fusion": "bidaf"}}, "model.attention.fusion is"),
        ({"decoder": {"kind": "two_stream"}}, "model.decoder.kind is two_stream"),
        ({"encoder": {"block": "qanet"}}, "model.encoder.block is qanet"),
    ],
)
def test_variants_ctranslate2_cannot_run_are_refused_naming_the_key(tiny_config, model, key):
    assert key in inexpressible(Loaded(tiny_config(model=model), None, None))
    assert inexpressible(Loaded(tiny_config(), None, None)) is None


def test_unknown_quantization_is_refused(tmp_path):
    with pytest.raises(NmtError, match="--quantization int3: expected one of float32"):
        export_ctranslate2(tmp_path / "x.pt", tmp_path / "out", "int3")
