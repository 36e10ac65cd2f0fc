"""``nmt export --format hf``: transformers loads the export with its Auto classes
and translates as ``nmt translate`` does, for every attention variant."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

from nmt.data.corpus import read_lines
from nmt.data.pipeline import checkpoint_vocabs
from nmt.data.vocab import EOS, PAD, UNK
from nmt.decoding.evaluate import record
from nmt.decoding.search import Translation, translate_lines
from nmt.export.huggingface import pegasus_model, residual_order
from nmt.io import checkpoint
from nmt.model.load import load_model
from nmt.model.seq2seq import Transformer
from nmt.setup.attention import ATTENTION
from nmt.setup.recipe import config_from_dict
from tests.conftest import require_extra, run_outside_the_checkout, skip_or_fail
from tests.test_cli import invoke

# every attention kind, and the position schemes whose tables nmt computes and
# does not save (transformers' loading leaves them to the model to fill)
VARIANTS = {
    **{kind: {"attention": {"kind": kind}} for kind in ATTENTION.names()},
    "rope": {"positions": {"kind": "rope"}},
    "alibi+cross_alibi": {"positions": {"kind": "alibi", "cross_alibi": True, "ratio": 1.1}},
    "untied": {"tie_embeddings": False},
    # one table both sides share: safetensors refused the export (shared tensors)
    "learned": {"positions": {"kind": "learned"}},
    "relative": {"positions": {"kind": "relative"}},
    "odd width": {"d_model": 33, "heads": 3},  # sinusoids that end with a sine
}


def variant(tiny_run, out, vocab: dict | None = None, **model) -> object:
    """tiny_run's checkpoint with another model section, its weights as nmt
    initialises them (any weights serve: the export must compute the same function)."""
    payload = checkpoint.load(tiny_run / "best.pt")
    payload["config"]["model"].update(model)
    payload["vocab"].update(vocab or {})
    cfg = config_from_dict(payload["config"])
    vocabs = checkpoint_vocabs(payload, out)
    torch.manual_seed(0)
    net = Transformer(cfg.model, len(vocabs.src), len(vocabs.tgt), PAD, vocabs.joint)
    payload["model"] = net.state_dict()
    checkpoint.save(out, payload)
    return out


def exported(path, tmp_path):
    require_extra("transformers", "hf")
    out = tmp_path / "hf"
    result = invoke("export", path, "--format", "hf", "-o", out)
    assert result.exit_code == 0, result.output
    return out


def generated(out, lines: list[str], **options) -> tuple[list[str], list[list[int]]]:
    """transformers' translations and their target ids (no ``<s>``, ``</s>``), one
    sentence at a time, with nmt's length limit as the card says (``max_new_tokens``
    from nmt-export.json)."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(out, trust_remote_code=True)
    model = AutoModelForSeq2SeqLM.from_pretrained(out, trust_remote_code=True)
    limit = json.loads((out / "nmt-export.json").read_text())["max_new_tokens"]
    outputs, tokens = [], []
    for line in lines:
        batch = tokenizer([line], return_tensors="pt")
        n = batch.input_ids.size(1)
        most = min(int(limit["a"] * n + limit["b"]), limit["cap"])
        ids = model.generate(**batch, max_new_tokens=most, **options)
        outputs.append(tokenizer.batch_decode(ids, skip_special_tokens=True)[0])
        tokens.append([i for i in ids[0, 1:].tolist() if i != EOS])
    return outputs, tokens


def nmt_translations(path, lines: list[str]) -> list[Translation]:
    """``nmt translate --beam 1``'s translations (text and target ids)."""
    loaded = load_model(path, torch.device("cpu"))
    cfg = dataclasses.replace(loaded.cfg.decode, beam=1)
    hyps = translate_lines(
        loaded.model, loaded.vocabs.src, loaded.vocabs.tgt, lines, cfg, torch.device("cpu")
    )
    return [h[0] for h in hyps]


STOCK = ("global", "odd width")  # what Pegasus expresses; the rest is remote code


@pytest.mark.slow
@pytest.mark.parametrize("name", STOCK)
def test_greedy_generate_of_a_stock_class_equals_nmt_translate(name, tiny_run, toy_dir, tmp_path):
    path = variant(tiny_run, tmp_path / "model.pt", **VARIANTS[name])
    out = exported(path, tmp_path)
    manifest = json.loads((out / "nmt-export.json").read_text())
    assert manifest["class"] == "PegasusForConditionalGeneration"
    assert not (out / "modeling_nmt.py").exists()
    lines = read_lines(toy_dir / "test.src")[:12]
    texts, ids = generated(out, lines, num_beams=1)
    ours = nmt_translations(path, lines)
    assert ids == [t.tokens for t in ours]
    # the same text, but where an output holds <unk>: SentencePiece writes " ⁇ ",
    # transformers drops it as a special token (docs/commands.md)
    assert all(a == t.text for a, t, i in zip(texts, ours, ids) if UNK not in i)


BEAM_LINES = 3  # the first lines, which beam search also translates (greedy: every line)

WITHOUT_NMT = """
import json, sys
BEAM_LINES = int(sys.argv[3])
sys.modules["nmt"] = None  # nmt made unimportable
import transformers
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
out = {"version": transformers.__version__}
for name, path, lines, limit in json.loads(sys.argv[1]):
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSeq2SeqLM.from_pretrained(path, trust_remote_code=True)
    out[name] = {"ids": tokenizer(lines)["input_ids"], "greedy": [], "beam": [], "most": []}
    for i, line in enumerate(lines):
        batch = tokenizer([line], return_tensors="pt")
        most = min(int(limit["a"] * batch.input_ids.size(1) + limit["b"]), limit["cap"])
        searches = [(1, "greedy"), (3, "beam")] if i < BEAM_LINES else [(1, "greedy")]
        for beams, key in searches:
            ids = model.generate(**batch, max_new_tokens=most, num_beams=beams)
            out[name][key].append(ids[0, 1:].tolist())
        out[name]["most"].append(most)
with open(sys.argv[2], "w") as f:
    json.dump(out, f)
"""


@pytest.mark.slow
def test_every_remote_code_export_runs_without_nmt_as_nmt_translate(tiny_run, toy_dir, tmp_path):
    """Every attention kind and position scheme that needs nmt's own code, loaded and
    run by transformers in a process where nmt cannot be imported (the export
    carries the code): greedy gives nmt translate's ids on eight lines; beam search
    (whose length penalty is transformers', as the card says) ends every output of
    the first BEAM_LINES with </s> within nmt's length limit, as the export's
    generation config forces it to."""
    lines = read_lines(toy_dir / "test.src")[:8]
    jobs, ours = [], {}
    for name in (n for n in VARIANTS if n not in STOCK):
        path = variant(tiny_run, tmp_path / f"{name}.pt", **VARIANTS[name])
        out = exported(path, tmp_path / name)
        assert json.loads((out / "nmt-export.json").read_text())["remote_code"]
        limit = json.loads((out / "nmt-export.json").read_text())["max_new_tokens"]
        jobs.append((name, str(out), lines, limit))
        ours[name] = nmt_translations(path, lines)
    modules = {"HF_MODULES_CACHE": str(tmp_path / "modules")}
    done = run_outside_the_checkout(
        WITHOUT_NMT, json.dumps(jobs), "out.json", str(BEAM_LINES), cwd=tmp_path, env=modules
    )
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads((tmp_path / "out.json").read_text())
    for name, *_ in jobs:
        greedy = [[i for i in ids if i not in (EOS, PAD)] for ids in theirs[name]["greedy"]]
        assert greedy == [t.tokens for t in ours[name]], name
        assert len(theirs[name]["beam"]) == BEAM_LINES, name
        beams = zip(theirs[name]["beam"], theirs[name]["most"])  # the first lines
        assert all(ids[-1] == EOS and len(ids) <= most for ids, most in beams), name


def transformers_4() -> Path:
    """transformers 4 beside the venv's 5, for a process to import first (``make test``
    installs it without dependencies into the venv's ``transformers4``: torch and the
    rest are the venv's)."""
    where = Path(sys.prefix) / "transformers4"
    if not (where / "transformers").is_dir():
        skip_or_fail(f"no transformers 4 in {where} (make test installs it)")
    return where


@pytest.mark.slow
def test_exports_run_under_transformers_4_as_under_5(tiny_run, toy_dir, tmp_path):
    """The card's snippet under transformers 4.57 (whose tokenizer classes and
    ``generate`` differ from 5's), run as the test above runs it with nmt unimportable:
    the tokenizer gives nmt's ids, and greedy search nmt translate's, for the stock
    Pegasus export (global) and for remote code (local_m); beam search ends its outputs
    (the first two lines) with </s> within nmt's limit."""
    where = transformers_4()
    lines = read_lines(toy_dir / "test.src")[:4]
    jobs, ours = [], {}
    for name in ("global", "local_m"):
        path = variant(tiny_run, tmp_path / f"{name}.pt", **VARIANTS[name])
        out = exported(path, tmp_path / name)
        limit = json.loads((out / "nmt-export.json").read_text())["max_new_tokens"]
        jobs.append((name, str(out), lines, limit))
        ours[name] = nmt_translations(path, lines)
    vocab = load_model(tiny_run, torch.device("cpu")).vocabs.src
    env = {"PYTHONPATH": str(where), "HF_MODULES_CACHE": str(tmp_path / "modules")}
    done = run_outside_the_checkout(
        WITHOUT_NMT, json.dumps(jobs), "out.json", "2", cwd=tmp_path, env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads((tmp_path / "out.json").read_text())
    assert theirs["version"].startswith("4."), theirs["version"]
    for name, *_ in jobs:
        assert theirs[name]["ids"] == [[*ids, EOS] for ids in vocab.encode(lines)], name
        greedy = [[i for i in ids if i not in (EOS, PAD)] for ids in theirs[name]["greedy"]]
        assert greedy == [t.tokens for t in ours[name]], name
        beams = list(zip(theirs[name]["beam"], theirs[name]["most"]))  # the first two lines
        assert len(beams) == 2 and all(ids[-1] == EOS and len(ids) <= most for ids, most in beams)


def test_separate_vocabularies_are_refused_with_nothing_written(tiny_run, tmp_path):
    require_extra("transformers", "hf")
    separate = {"joint": False, "tgt": checkpoint.load(tiny_run / "best.pt")["vocab"]["src"]}
    path = variant(tiny_run, tmp_path / "model.pt", vocab=separate)
    result = invoke("export", path, "--format", "hf", "-o", tmp_path / "hf")
    assert result.exit_code == 2 and "data.vocab.joint is false" in result.output
    assert not (tmp_path / "hf").exists()


@pytest.mark.slow
def test_the_tokenizer_gives_nmts_ids(tiny_run, toy_dir, tmp_path):
    from transformers import AutoTokenizer

    out = exported(tiny_run, tmp_path)
    # a class transformers 4 knows too (5 writes TokenizersBackend, which 4 refuses)
    config = json.loads((out / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    tokenizer = AutoTokenizer.from_pretrained(out)
    vocab = load_model(tiny_run, torch.device("cpu")).vocabs.src
    lines = [line for split in ("train", "test") for line in read_lines(toy_dir / f"{split}.src")]
    lines += ["  spaces  between ", "Ünïcödé ﬁ ligature", ""]
    assert [[*ids, EOS] for ids in vocab.encode(lines)] == tokenizer(lines)["input_ids"]
    assert tokenizer.decode(vocab.encode(lines[:1])[0]) == vocab.decode(vocab.encode(lines[:1]))[0]


def test_pegasus_computes_nmts_logits(tiny_run):
    """The stock model's logits are nmt's, for a padded batch and any target."""
    require_extra("transformers", "hf")
    loaded = load_model(tiny_run, torch.device("cpu"))
    hf = pegasus_model(loaded)
    src = torch.tensor([[5, 6, 7, 8, EOS], [9, 10, EOS, PAD, PAD]])
    tgt = torch.tensor([[2, 11, 12, 13], [2, 14, 15, 16]])
    with torch.no_grad():
        ours = loaded.model(src, tgt)
        theirs = hf(input_ids=src, attention_mask=src != PAD, decoder_input_ids=tgt).logits
    torch.testing.assert_close(theirs, ours, atol=1e-5, rtol=1e-5)


def test_the_residual_order_is_pegasus_position_layout():
    """nmt's sinusoid table, reordered, is the table Pegasus computes itself."""
    require_extra("transformers", "hf")
    from transformers.models.pegasus.modeling_pegasus import PegasusSinusoidalPositionalEmbedding

    from nmt.model.positions import sinusoids

    theirs = PegasusSinusoidalPositionalEmbedding(64, 16).create_weight()
    torch.testing.assert_close(sinusoids(64, 16)[:, residual_order(16)], theirs)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["global", "local_m"])
def test_beam_search_runs_through_both_kinds_of_export(kind, tiny_run, toy_dir, tmp_path):
    """Beams expand the stock model's cache and the remote model's encoder output
    alike; outputs may differ from nmt's (docs/commands.md says how), their count
    and length limit may not."""
    path = variant(tiny_run, tmp_path / "model.pt", attention={"kind": kind})
    lines = read_lines(toy_dir / "test.src")[:8]
    texts, ids = generated(exported(path, tmp_path), lines, num_beams=3)
    loaded = load_model(path, torch.device("cpu"))
    d, n = loaded.cfg.decode, [len(s) + 1 for s in loaded.vocabs.src.encode(lines)]
    assert len(texts) == len(lines) and all(texts)
    assert all(len(out) < int(d.max_len_a * m + d.max_len_b) for out, m in zip(ids, n))


@pytest.mark.slow
def test_the_card_says_what_was_trained_and_how_it_scored(tiny_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    score = {"sentences": 15, "beam": 2, "bleu": 12.345, "chrf": 40.0, "bleu_signature": "nrefs:1"}
    record(run, "test", score)
    record(run, "test@decode.beam=9", {**score, "bleu": 99.0})  # not the recipe's decoding
    card = (exported(run, tmp_path) / "README.md").read_text()
    assert card.startswith("---\n")
    assert "| test | 15 | 2 | 12.35 | 40.00 |" in card and "99.00" not in card
    assert "attention-global" in card and "kind: global" in card  # the tag, the recipe
    from huggingface_hub import ModelCard  # the metadata as the Hub reads it

    data = ModelCard(card).data
    assert data.library_name == "transformers" and data.license == "unknown"
    assert {(r.dataset_split, r.metric_type, r.metric_value) for r in data.eval_results} == {
        ("test", "bleu", 12.35),
        ("test", "chrf", 40.0),
    }
    licensed = invoke("export", run, "--format", "hf", "-o", tmp_path / "cc", "--license",
                      "cc-by-4.0")  # fmt: skip
    assert licensed.exit_code == 0, licensed.output
    assert ModelCard((tmp_path / "cc/README.md").read_text()).data.license == "cc-by-4.0"
    refused = invoke("export", run, "-o", tmp_path / "ct2", "--license", "mit")
    assert refused.exit_code == 2 and "--license: only --format hf" in refused.output
    (tmp_path / "hf").rename(tmp_path / "first")
    card = (exported(run / "last.pt", tmp_path) / "README.md").read_text()
    assert "No scores: the run's results.json holds best.pt's, and this is last.pt." in card
