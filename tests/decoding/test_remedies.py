"""The decoding remedies for long inputs through the library and the command line:
--length oracle emits exactly the reference's length, evaluate keeps another
decoding of a checkpoint beside the recipe's own, bad values are one line."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from nmt.cli import app
from nmt.decoding.search import Options, encode_source, translate_lines
from nmt.errors import NmtError
from nmt.io import checkpoint
from nmt.model.load import load_model
from nmt.setup.decoding import DecodeConfig, with_overrides
from nmt.setup.plugins import import_plugins

PLUGIN = Path(__file__).parents[1] / "plugins" / "length_prior_remedy.py"

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.mark.parametrize("beam", [1, 3])
def test_the_oracle_length_is_exactly_each_references_length(tiny_run, toy_dir, beam):
    loaded = load_model(tiny_run, torch.device("cpu"))
    src = (toy_dir / "test.src").read_text().splitlines()[:8]
    refs = (toy_dir / "test.tgt").read_text().splitlines()[:8]
    refs[3] = refs[3] + " " + refs[4]  # longer than the model would go by itself
    v = loaded.vocabs
    cfg = DecodeConfig(beam=beam)
    out = translate_lines(
        loaded.model, v.src, v.tgt, src, cfg, torch.device("cpu"), Options(refs=refs)
    )
    want = [len(ids) for ids in encode_source(v.tgt, refs, loaded.model.cfg.max_positions - 1)]
    assert [len(hyps[0].tokens) for hyps in out] == want


def test_least_length_holds_every_output_open(tiny_run, toy_dir):
    loaded = load_model(tiny_run, torch.device("cpu"))
    src = (toy_dir / "test.src").read_text().splitlines()[:8]
    cfg = DecodeConfig(beam=3, min_len_a=1.2, min_len_b=2)
    out = translate_lines(loaded.model, loaded.vocabs.src, loaded.vocabs.tgt, src, cfg, "cpu")
    sizes = [len(s) + 1 for s in encode_source(loaded.vocabs.src, src, 511)]  # with EOS
    for hyps, s in zip(out, sizes):
        assert len(hyps[0].tokens) >= min(int(1.2 * s + 2), int(1.5 * s + 10) - 1)


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_evaluate_keeps_another_decoding_beside_the_recipes_own(tiny_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    result = invoke("evaluate", run, "--split", "test", "--device", "cpu")
    assert result.exit_code == 0, result.output
    args = ("--set", "decode.coverage=0.3", "--set", "decode.word_reward=0.2", "--length", "oracle")
    result = invoke("evaluate", run, "--split", "test*2", "--device", "cpu", *args)
    assert result.exit_code == 0, result.output
    results = json.loads((run / "results.json").read_text())
    name = "test*2@decode.coverage=0.3,decode.word_reward=0.2,length=oracle"
    assert set(results) == {"test", name}
    assert (run / f"{name}.hyp").read_text().count("\n") == results[name]["sentences"]


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_evaluate_reads_another_corpus_and_keeps_it_apart(tiny_run, toy_dir, tmp_path):
    """--data DIR: the splits come from another directory (an out-of-domain test set,
    documents too), scored as the recipe's own would be and kept as SPLIT@data=NAME."""
    run, other = tmp_path / "run", tmp_path / "talks"
    shutil.copytree(tiny_run, run)
    other.mkdir()
    for side in ("src", "tgt"):
        shutil.copy(toy_dir / f"test.{side}", other / f"talk.{side}")
    n = (other / "talk.src").read_text().count("\n")
    (other / "talk.doc").write_text("".join(f"d{i // 4}\n" for i in range(n)))
    result = invoke("evaluate", run, "--split", "test", "--device", "cpu")
    assert result.exit_code == 0, result.output
    args = ("--data", other, "--split", "talk", "--split", "talk~2", "--device", "cpu")
    result = invoke("evaluate", run, *args)
    assert result.exit_code == 0, result.output
    results = json.loads((run / "results.json").read_text())
    assert set(results) == {"test", "talk@data=talks", "talk~2@data=talks"}
    assert results["talk@data=talks"]["bleu"] == results["test"]["bleu"]  # the same pairs
    assert results["talk~2@data=talks"]["sentences"] == (n // 4) * 2 + (n % 4 > 0) + (n % 4 > 2)
    missing = invoke("evaluate", run, "--data", tmp_path / "nowhere", "--split", "talk")
    assert (
        missing.exit_code == 2
        and "--data" in missing.output
        and "no such directory" in missing.output
    )


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_a_relative_data_dir_read_from_elsewhere_says_how_to_reach_it(
    tiny_run, toy_dir, tmp_path, monkeypatch
):
    """A run trained with ``data.dir: toy`` from the corpus's parent directory,
    evaluated from another directory: one line naming the directory it was read
    from and the two ways out; from where it was trained, and with --data, it
    evaluates."""
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    payload = checkpoint.load(run / "best.pt")
    payload["config"]["data"]["dir"] = toy_dir.name
    checkpoint.save(run / "best.pt", payload)
    monkeypatch.chdir(tmp_path)
    result = invoke("evaluate", run, "--split", "test", "--device", "cpu")
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert f"data.dir: {toy_dir.name}: no such directory" in result.output
    assert f"relative to where the run was trained, not {tmp_path}" in result.output
    assert "--data DIR" in result.output
    result = invoke("evaluate", run, "--split", "test", "--data", toy_dir, "--device", "cpu")
    assert result.exit_code == 0, result.output
    monkeypatch.chdir(toy_dir.parent)
    result = invoke("evaluate", run, "--split", "test", "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert set(json.loads((run / "results.json").read_text())) >= {
        "test",
        f"test@data={toy_dir.name}",
    }


def test_translate_takes_the_oracle_lengths_from_its_references(tiny_run, toy_dir, tmp_path):
    out = tmp_path / "hyp.txt"
    src, ref = toy_dir / "test.src", toy_dir / "test.tgt"
    args = ("-i", src, "-o", out, "--length", "oracle", "--ref", ref, "--set", "decode.coverage=1")
    result = invoke("translate", tiny_run, *args)
    assert result.exit_code == 0, result.output
    assert out.read_text().count("\n") == src.read_text().count("\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--length", "oracle"], "--length oracle needs --ref"),
        (["--ref", "REF"], "--ref: only --length oracle uses it"),
        (["--length", "oracle", "--ref", "SHORT"], "--ref .*: 2 lines, fewer than the input's"),
        (["--length", "longest"], "--length longest: model .* or oracle"),
        (["--set", "decode.coverage=-1"], r"--set decode\.coverage: must be in \[0, 100\]"),
        (["--set", "train.lr=1"], r"--set train\.lr=1: only decode\.KEY=VALUE"),
        (["--set", "decode.coverage=0.2", "--beam", "1"], "--coverage: .* with beam 1"),
        (["--set", "decode.min_len_a=9"], r"--set decode\.min_len_a: must be in 0\.\.decode"),
    ],
)
def test_bad_remedy_options_are_one_line_and_write_nothing(
    tiny_run, toy_dir, tmp_path, args, message
):
    short = tmp_path / "short.txt"
    short.write_text("a\nb\n")
    paths = {"REF": toy_dir / "test.tgt", "SHORT": short}
    out = tmp_path / "hyp.txt"
    given = [paths.get(a, a) for a in args]
    result = invoke("translate", tiny_run, "-i", toy_dir / "test.src", "-o", out, *given)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output
    assert re.search(message, lines[0]), lines[0]
    assert not out.exists()


def test_decode_overrides_name_an_unknown_key():
    with pytest.raises(NmtError, match=r"decode\.coverge: unknown key .*decode\.coverage"):
        with_overrides(DecodeConfig(), ["decode.coverge=0.2"])


def test_a_remedy_from_a_plug_in_is_one_class_and_one_registration_line(tiny_run, toy_dir):
    """tests/plugins/length_prior_remedy.py registers a remedy outside the package;
    listed in decode.remedies, beam search ranks every hypothesis with its term
    (−weight·|length − source pieces|, the output's EOS counted), and the recipe
    names it and checks its options as any section's."""
    import_plugins([str(PLUGIN)])
    loaded = load_model(tiny_run, torch.device("cpu"))
    src = (toy_dir / "test.src").read_text().splitlines()[:6]
    plain = with_overrides(loaded.cfg.decode, ["decode.beam=3"])
    prior = with_overrides(plain, ["decode.remedies=[{kind: length_prior, weight: 5.0}]"])
    assert type(prior.remedies[0]).__name__ == "LengthPriorConfig"
    v, cpu = loaded.vocabs, torch.device("cpu")
    a = translate_lines(loaded.model, v.src, v.tgt, src, plain, cpu)
    b = translate_lines(loaded.model, v.src, v.tgt, src, prior, cpu)
    for (x,), (y,), pieces in zip(a, b, encode_source(v.src, src, 1000)):
        assert x.tokens == y.tokens  # this untrained model never ends early either way
        gap = abs(len(y.tokens) + 1 - len(pieces))
        assert y.score == pytest.approx(x.score - 5.0 * gap, abs=1e-3)
    with pytest.raises(NmtError, match=r"decode\.remedies\[0\]\.weigth: unknown key \(did you"):
        with_overrides(plain, ["decode.remedies=[{kind: length_prior, weigth: 1}]"])
    with pytest.raises(NmtError, match=r"unknown decoding remedy 'nope'; valid: .*length_prior"):
        with_overrides(plain, ["decode.remedies=[{kind: nope}]"])
