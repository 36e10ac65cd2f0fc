"""``nmt export --format onnx``: onnxruntime runs the export's graphs in its own loop
(translate.py, without nmt or torch) and translates as ``nmt translate`` does, for
every attention kind and position scheme; what cannot be exported exactly is
refused with the reason."""

from __future__ import annotations

import dataclasses
import json
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nmt.data.corpus import read_lines
from nmt.data.pipeline import checkpoint_vocabs
from nmt.data.vocab import PAD
from nmt.decoding.search import translate_lines
from nmt.export.onnx import TOLERANCE, Start, difference, first_step
from nmt.io import checkpoint
from nmt.model.load import load_model
from nmt.model.seq2seq import Transformer
from nmt.setup.attention import ATTENTION
from nmt.setup.model import POSITIONS
from nmt.setup.recipe import config_from_dict
from tests.conftest import require_extra, run_outside_the_checkout
from tests.test_cli import invoke

# every attention kind beside every position scheme and the other parts of a model
# that change its encoder or decoder step, two at a time (an export costs seconds)
ONNX_VARIANTS = {
    "global + qanet encoder": {"encoder": {"block": "qanet"}},
    "banded local_m + rope": {
        "attention": {"kind": "local_m", "path": "windowed"},
        "positions": {"kind": "rope"},
    },
    "local_p + alibi + cross_alibi": {
        "attention": {"kind": "local_p"},
        "positions": {"kind": "alibi", "cross_alibi": True, "ratio": 1.1},
    },
    "local_s + learned + two_stream decoder": {
        "attention": {"kind": "local_s"},
        "positions": {"kind": "learned"},
        "decoder": {"kind": "two_stream"},
    },
    "hard + relative": {"attention": {"kind": "hard"}, "positions": {"kind": "relative"}},
    "sparsemax + bidaf fusion": {
        "attention": {"kind": "sparsemax"},
        "decoder": {"fusion": "bidaf"},
    },
}


def nmts_own(registry) -> set[str]:
    """The names nmt registers (not a plug-in's that another test loaded here)."""
    return {n for n in registry.names() if registry.get(n).__module__.startswith("nmt.")}


def test_the_variants_cover_every_kind_and_scheme():
    models = ONNX_VARIANTS.values()
    kinds = {m.get("attention", {}).get("kind", "global") for m in models}
    schemes = {m.get("positions", {}).get("kind", "sinusoidal") for m in models}
    assert kinds == nmts_own(ATTENTION) and schemes == nmts_own(POSITIONS)


# translate.py run as a user runs it, in a process where neither nmt nor torch can
# be imported: argv[1] the jobs (name, export directory), argv[2] the source file
WITHOUT_NMT = """
import json, runpy, sys
sys.modules["nmt"] = None
sys.modules["torch"] = None
jobs, source = json.loads(sys.argv[1]), sys.argv[2]
lines = open(source, encoding="utf-8").read().splitlines()
out = {}
for name, directory in jobs:
    loop = runpy.run_path(f"{directory}/translate.py")
    translator = loop["Translator"](directory, threads=1)
    out[name] = {
        "greedy": translator.translate(lines, beam=1), "beam": translator.translate(lines, beam=5)
    }
print(json.dumps(out))
"""


def variant(tiny_run, out, sections: dict | None = None, **model) -> object:
    """tiny_run's checkpoint with another model section (and other ``sections``),
    its weights as nmt initialises them (any weights serve: the export must compute
    the same function, and the loop must search as nmt does)."""
    payload = checkpoint.load(tiny_run / "best.pt")
    payload["config"]["model"].update(model)
    for name, values in (sections or {}).items():
        payload["config"][name].update(values)
    cfg = config_from_dict(payload["config"])
    vocabs = checkpoint_vocabs(payload, out).separated(cfg.model.decoder.group_layers > 0)
    torch.manual_seed(0)
    net = Transformer(cfg.model, len(vocabs.src), len(vocabs.tgt), PAD, vocabs.joint)
    payload["model"] = net.state_dict()
    checkpoint.save(out, payload)
    return out


@pytest.fixture(scope="module")
def export_of(tiny_run, tmp_path_factory):
    """``export_of(NAME)``: the checkpoint of ONNX_VARIANTS[NAME] and its export, made
    once for the module (an export costs seconds) and shared by the tests that only
    read them; a test that changes an export works on a copy."""
    made: dict[str, tuple[Path, Path]] = {}

    def get(name: str) -> tuple[Path, Path]:
        if name not in made:
            out = tmp_path_factory.mktemp("onnx")
            path = variant(tiny_run, out / "model.pt", **ONNX_VARIANTS[name])
            made[name] = (path, exported(path, out / "onnx"))
        return made[name]

    return get


# the variant whose export the tests of the script and of the check read
READ = "global + qanet encoder"


def exported(path, out):
    require_extra("onnxruntime", "onnx")
    result = invoke("export", path, "--format", "onnx", "-o", out)
    assert result.exit_code == 0, result.output
    return out


def nmt_translations(path, lines: list[str], beam: int) -> list[str]:
    """``nmt translate --beam BEAM``'s output lines: the run's search settings."""
    loaded = load_model(path, torch.device("cpu"))
    cfg = dataclasses.replace(loaded.cfg.decode, beam=beam)
    found = translate_lines(
        loaded.model, loaded.vocabs.src, loaded.vocabs.tgt, lines, cfg, torch.device("cpu")
    )
    return [n[0].text for n in found]


@pytest.mark.slow
@pytest.mark.parametrize("name", ONNX_VARIANTS)
def test_every_kind_runs_without_nmt_as_nmt_translate(name, export_of, toy_dir, tmp_path):
    """Each variant's export, run by translate.py where nmt and torch cannot be
    imported, gives nmt translate's output on every line, greedy and beam 5
    (the lines: the toy test set's first 8, an empty one and the longest; every
    line of it, for every kind: docs/benchmarks.md)."""
    test = read_lines(toy_dir / "test.src")
    lines = [*test[:8], "", max(test, key=len)]
    source = tmp_path / "source.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    path, out = export_of(name)
    jobs = [(name, str(out))]
    done = run_outside_the_checkout(WITHOUT_NMT, json.dumps(jobs), str(source), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout)[name]
    assert theirs["greedy"] == nmt_translations(path, lines, 1)
    assert theirs["beam"] == nmt_translations(path, lines, 5)


@pytest.mark.slow  # an export: seconds
def test_the_script_translates_stdin_to_one_line_per_line(export_of, toy_dir, tmp_path):
    path, made = export_of(READ)
    out = shutil.copytree(made, tmp_path / "onnx")
    lines = ["", *read_lines(toy_dir / "test.src")[:5], ""]
    done = subprocess.run(
        [sys.executable, str(out / "translate.py"), str(out), "--beam", "2"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:-1] == nmt_translations(path, lines, 2)
    manifest = json.loads((out / "nmt-export.json").read_text())
    assert manifest["format"] == "onnx" and manifest["largest_difference"] <= TOLERANCE
    # from Python, one string is refused, not translated character by character
    loop = runpy.run_path(str(out / "translate.py"))
    with pytest.raises(TypeError, match=r"^lines: a list of lines, not one string"):
        loop["Translator"](out, threads=1).translate(lines[1])
    # a line longer than the model's positions is cut, as nmt cuts it, and said
    long = " ".join(read_lines(toy_dir / "test.src")) * 4
    done = subprocess.run(
        [sys.executable, str(out / "translate.py"), str(out), "--beam", "1"],
        input=long + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "1 input line(s) longer than" in done.stderr, done.stderr
    assert done.stdout.split("\n")[:-1] == nmt_translations(path, [long], 1)
    # bad input: one line naming it, exit code 2, nothing on stdout
    for damage, stdin, says in (
        (b"", b"ok\n\xff\n", "standard input: line 2 is not UTF-8 text"),
        (b"damaged", b"ok\n", "not an nmt ONNX export"),
    ):
        if damage:
            (out / "step.onnx").write_bytes(damage)
        done = subprocess.run(
            [sys.executable, str(out / "translate.py"), str(out)],
            input=stdin,
            capture_output=True,
            timeout=120,
        )
        error = done.stderr.decode()
        assert done.returncode == 2 and says in error and not done.stdout, error
        assert len(error.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "model, sections, reason",
    [
        (
            {"decoder": {"group_layers": 1}},
            {"data": {"join": {"prob": 0.5}}},
            "model.decoder.group_layers is set",
        ),
        ({}, {"decode": {"coverage": 0.2}}, "decode.coverage is 0.2"),
    ],
)
def test_what_the_loop_cannot_reproduce_is_refused_with_nothing_written(
    tiny_run, tmp_path, model, sections, reason
):
    require_extra("onnxruntime", "onnx")
    path = variant(tiny_run, tmp_path / "model.pt", sections, **model)
    result = invoke("export", path, "--format", "onnx", "-o", tmp_path / "onnx")
    assert result.exit_code == 2, result.output
    assert reason in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "onnx").exists()


@pytest.mark.slow  # an export: seconds
def test_the_check_catches_a_graph_that_is_wrong_at_other_shapes(export_of, tmp_path):
    """The legacy exporter bakes the traced lengths in: its start graph runs at
    another shape and gives other log-probabilities, without an error. The export's
    check (a batch and lengths not traced) finds the difference; the dynamo graphs
    pass it."""
    require_extra("onnxruntime", "onnx")
    path, made = export_of(READ)
    model = load_model(path, torch.device("cpu")).model
    with torch.no_grad():
        manifest = json.loads((made / "nmt-export.json").read_text())
        names, carried = manifest["state"], manifest["carried"]
        for graph in ("start.onnx", "step.onnx"):
            shutil.copy(made / graph, tmp_path / graph)
        assert difference(model, tmp_path, names, carried) <= TOLERANCE
        src = torch.randint(4, 50, (2, 7))
        first_step(model, src)
        torch.onnx.export(
            Start(model),
            (src,),
            str(tmp_path / "start.onnx"),
            dynamo=False,
            input_names=["src"],
            output_names=["logp", *names],
            dynamic_axes={"src": {0: "B", 1: "S"}},
        )
        assert difference(model, tmp_path, names, carried) > TOLERANCE


def test_options_of_other_formats_are_refused(tiny_run, tmp_path):
    for option in (["--quantization", "int8"], ["--license", "mit"]):
        result = invoke("export", tiny_run, "--format", "onnx", "-o", tmp_path / "x", *option)
        assert result.exit_code == 2 and "the onnx format takes neither" in result.output
        assert not (tmp_path / "x").exists()
