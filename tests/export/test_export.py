"""``nmt export --format ctranslate2``: the exported model decodes as ``nmt`` does."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from nmt.data.corpus import read_lines
from nmt.decoding.search import translate_lines
from nmt.errors import NmtError
from nmt.export.ctranslate2 import export_ctranslate2, inexpressible
from nmt.io import checkpoint
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


def ctranslate2_outputs(exported, lines: list[str]) -> list[str]:
    """Greedy CTranslate2 translations, called as the manifest says."""
    import ctranslate2
    import sentencepiece as spm

    translator = ctranslate2.Translator(str(exported), device="cpu")
    source = spm.SentencePieceProcessor(model_file=str(exported / "source.spm"))
    target = spm.SentencePieceProcessor(model_file=str(exported / "target.spm"))
    manifest = json.loads((exported / "nmt-export.json").read_text())
    limit = manifest["max_decoding_length"]
    outputs = []
    for line in lines:
        pieces = source.encode(line, out_type=str)
        n = min(int(limit["a"] * (len(pieces) + 1) + limit["b"]), limit["cap"]) - 1
        out = translator.translate_batch(
            [pieces],
            beam_size=1,
            max_decoding_length=n,
            suppress_sequences=manifest["suppress_sequences"],
        )
        outputs.append(target.decode(out[0].hypotheses[0]))
    return outputs


def nmt_outputs(checkpoint, lines: list[str]) -> list[str]:
    loaded = load_model(checkpoint, torch.device("cpu"))
    cfg = dataclasses.replace(loaded.cfg.decode, beam=1)
    hyps = translate_lines(
        loaded.model, loaded.vocabs.src, loaded.vocabs.tgt, lines, cfg, torch.device("cpu")
    )
    return [h[0].text for h in hyps]


def test_greedy_outputs_equal_nmt_translate_beam_1(exported, tiny_run, toy_dir):
    lines = read_lines(toy_dir / "test.src")[:30]
    assert ctranslate2_outputs(exported, lines) == nmt_outputs(tiny_run, lines)


def test_the_manifest_carries_nmts_length_limit(tiny_run, toy_dir, tmp_path):
    """A recipe whose limit cuts every output (a = 0.2, b = 2): called with the
    manifest's limit, CTranslate2 stops where nmt does."""
    payload = checkpoint.load(tiny_run / "best.pt")
    payload["config"]["decode"].update(max_len_a=0.2, max_len_b=2)
    checkpoint.save(tmp_path / "short.pt", payload)
    assert invoke("export", tmp_path / "short.pt", "-o", tmp_path / "ct2").exit_code == 0
    lines = read_lines(toy_dir / "test.src")[:30]
    ours = nmt_outputs(tmp_path / "short.pt", lines)
    assert ctranslate2_outputs(tmp_path / "ct2", lines) == ours
    assert max(len(h.split()) for h in ours) < max(len(s.split()) for s in lines)


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
        ({"decoder": {"fusion": "bidaf"}}, "model.decoder.fusion is"),
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
