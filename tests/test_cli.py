"""The command line end to end (Typer's CliRunner), and its error contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import typer
from typer.testing import CliRunner

from nmt.cli import ONEDNN_CACHE, app
from nmt.io import checkpoint
from tests.conftest import subprocess_env

runner = CliRunner()


def invoke(*args, input=None):
    return runner.invoke(app, [str(a) for a in args], input=input)


@pytest.mark.slow  # trains and translates: a second or more
def test_train_translate_score_end_to_end(tiny_recipe, toy_dir, tmp_path):
    recipe = tiny_recipe(train={"max_steps": 8, "valid_every": 4})
    run = tmp_path / "run"
    result = invoke("train", recipe, "--device", "cpu")
    assert result.exit_code == 0, result.output
    results = json.loads((run / "results.json").read_text())
    assert "bleu_signature" in results["test"] and results["test"]["sentences"] == 15

    src = (toy_dir / "test.src").read_text().splitlines()[:6]
    text = "\n".join([src[0], "", src[1], "ünïcödé 中文 " + src[2], "x " * 400, src[3]]) + "\n"
    result = invoke("translate", run, "--beam", 3, input=text)
    assert result.exit_code == 0, result.output
    assert len(result.stdout.split("\n")) - 1 == 6
    assert result.stdout.split("\n")[1] == ""

    (tmp_path / "in.txt").write_text(text)
    out = tmp_path / "out.txt"
    result = invoke(
        "translate", run / "best.pt", "-i", tmp_path / "in.txt", "-o", out, "--n-best", 2
    )
    assert result.exit_code == 0, result.output
    lines = out.read_text().splitlines()
    ids = [int(line.split(" ||| ")[0]) for line in lines]
    assert ids == [0, 0, 1, 2, 2, 3, 3, 4, 4, 5, 5]  # an empty line has one (empty) translation

    maps = tmp_path / "maps"
    args = ("-i", tmp_path / "in.txt", "-o", out, "--attention-dir", maps)
    result = invoke("translate", run, *args)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in maps.iterdir()) == ["0.npz", "2.npz", "3.npz", "4.npz", "5.npz"]
    saved = np.load(maps / "0.npz")
    assert saved["weights"].shape == (1, 2, len(saved["tgt"]), len(saved["src"]))
    np.testing.assert_allclose(saved["weights"].sum(-1), 1.0, rtol=1e-5)

    png = tmp_path / "heat.png"
    result = invoke("attention", run, "--src", src[0], "--head", "0", "-o", png)
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for head in ("7", "²"):  # "²".isdigit(), but int("²") fails
        result = invoke("attention", run, "--src", src[0], "--head", head, "-o", png)
        assert result.exit_code == 2 and f"head {head}:" in result.output, result.output

    result = invoke(
        "score",
        run / "test.hyp",
        "--ref",
        toy_dir / "test.tgt",
        "--json",
        "--metrics",
        "bleu,chrf,ter",
    )
    assert result.exit_code == 0, result.output
    assert [s["name"] for s in json.loads(result.stdout)] == ["bleu", "chrf", "ter"]


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_a_run_with_an_average_a_batch_schedule_and_a_curriculum_translates(
    tiny_recipe, toy_dir, tmp_path
):
    """train.ema, train.accumulate_schedule and train.length_curriculum through the
    CLI: the test decoding at the end of training and ``nmt translate`` of the run
    read the same averaged weights, one output line per input line; the log records
    the curriculum's competence."""
    recipe = tiny_recipe(train={"max_steps": 8, "valid_every": 4})
    args = ("--set", "train.ema=0.9", "--set", "train.accumulate_schedule=[[4, 2]]")
    args += ("--set", "train.length_curriculum={start: 0.2, steps: 6}")
    result = invoke("train", recipe, "--device", "cpu", *args)
    assert result.exit_code == 0, result.output
    run = tmp_path / "run"
    assert set(checkpoint.load(run / "last.pt")) >= {"model", "training_weights"}
    logged = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["competence"] for r in logged if "competence" in r][-1] == 1.0
    out = tmp_path / "test.out"
    result = invoke("translate", run, "-i", toy_dir / "test.src", "-o", out, "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert out.read_text() == (run / "test.hyp").read_text()
    assert len(out.read_text().splitlines()) == 15


@pytest.mark.parametrize(
    ("override", "expect"),
    [
        ("model.atention.kind=global", "did you mean 'model.attention'"),
        ("model.heads=5", "model.heads: must divide model.d_model"),
        ("data.dir=/nonexistent", "data.dir: /nonexistent: no such directory"),
        ("train.length_curriculum={start: 0}", "train.length_curriculum.start: must be in"),
    ],
)
def test_bad_recipe_is_one_line_exit_2(tiny_recipe, override, expect):
    result = invoke("train", tiny_recipe(), "--set", override)
    assert result.exit_code == 2
    assert expect in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_score_line_count_mismatch(tmp_path):
    (tmp_path / "h").write_text("a\nb\n")
    (tmp_path / "r").write_text("a\n")
    result = invoke("score", tmp_path / "h", "--ref", tmp_path / "r")
    assert result.exit_code == 2 and "has 2 lines but" in result.output and "has 1" in result.output


def test_translate_refuses_a_non_checkpoint(tmp_path):
    (tmp_path / "x.pt").write_text("hello")
    result = invoke("translate", tmp_path / "x.pt", input="a\n")
    assert result.exit_code == 2 and "x.pt" in result.output


def test_toy_command(tmp_path):
    result = invoke("data", "toy", tmp_path / "toy", "--size", 40)
    assert result.exit_code == 0 and (tmp_path / "toy" / "test_long.align").is_file()


def every_command(group: typer.core.TyperGroup, path: tuple[str, ...] = ()) -> list[tuple]:
    """Every command and group of the app, walked from the top (``()`` is ``nmt``)."""
    found = [path]
    for name, command in group.commands.items():
        if hasattr(command, "commands"):  # a group: nmt data
            found += every_command(command, (*path, name))
        else:
            found.append((*path, name))
    return found


def test_every_command_shows_an_example_in_its_help():
    commands = every_command(typer.main.get_command(app))
    assert len(commands) > 12 and ("data", "fetch") in commands
    for command in commands:
        assert "Example: nmt" in invoke(*command, "--help").output, command
    assert "--install-completion" in invoke("--help").output


def test_version():
    """The installed distribution's version (nmt-attention: the name is not the
    import name, and an old nmt.egg-info beside the checkout must not answer)."""
    from importlib.metadata import version

    from nmt import DISTRIBUTION

    result = invoke("--version")
    assert result.exit_code == 0 and result.output.strip() == f"nmt {version(DISTRIBUTION)}"


def test_score_reads_hypotheses_from_stdin(tmp_path):
    (tmp_path / "h").write_text("a small cat sat\non the mat\n")
    (tmp_path / "r").write_text("a small cat sat\non a mat\n")
    from_file = invoke("score", tmp_path / "h", "--ref", tmp_path / "r", "--json")
    piped = invoke(
        "score", "-", "--ref", tmp_path / "r", "--json", input="a small cat sat\non the mat\n"
    )
    assert piped.exit_code == 0 and json.loads(piped.output) == json.loads(from_file.output)


def test_data_prepare_reports_the_cache_entry(tiny_recipe):
    result = invoke("data", "prepare", tiny_recipe())
    assert result.exit_code == 0, result.output
    assert "training pairs of 300" in result.output and "data-" in result.output


def test_translate_sample_is_seeded_and_refuses_what_it_cannot_use(tiny_run, toy_dir):
    text = "".join(line + "\n" for line in (toy_dir / "test.src").read_text().splitlines()[:5])
    first = invoke("translate", tiny_run, "--sample", "--temperature", 1.5, "--seed", 7, input=text)
    again = invoke("translate", tiny_run, "--sample", "--temperature", 1.5, "--seed", 7, input=text)
    assert first.exit_code == 0, first.output
    assert first.stdout == again.stdout and first.stdout.count("\n") == 5
    for args, message in [
        (["--top-k", 5], "--top-k: only --sample uses it"),
        (["--sample", "--beam", 4], "--beam: --sample draws one output per line"),
        (["--sample", "--n-best", 2], "--n-best: --sample draws one output per line"),
        (["--sample", "--top-p", 0], "--top-p: must be in (0, 1]"),
    ]:
        result = invoke("translate", tiny_run, *args, input=text)
        assert result.exit_code == 2 and message in result.output, result.output


@pytest.mark.parametrize(
    ("name", "magic"), [("heat.pdf", b"%PDF"), ("heat.svg", b"<?xml"), ("heat.PNG", b"\x89PNG")]
)
def test_attention_writes_the_format_its_suffix_names(tiny_run, tmp_path, name, magic):
    figure = tmp_path / name
    result = invoke("attention", tiny_run, "--src", "lo nute", "-o", figure)
    assert result.exit_code == 0, result.output
    assert figure.read_bytes().startswith(magic)


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_attention_draws_a_grid_of_every_layer_and_head(tiny_run, tmp_path):
    """tiny_run has 1 decoder layer and 2 heads: 'all' gives a panel each, side by
    side on one scale, wider than the one-panel figure."""
    from PIL import Image

    sizes = {}
    for name, args in (("one", ()), ("grid", ("--layer", "all", "--head", "all"))):
        figure = tmp_path / f"{name}.png"
        result = invoke("attention", tiny_run, "--src", "lo nute", *args, "-o", figure)
        assert result.exit_code == 0, result.output
        sizes[name] = Image.open(figure).size
    assert sizes["grid"][0] > 1.5 * sizes["one"][0]
    for args, words in (
        (("--layer", "x"), "layer x: expected a layer index or 'all'"),
        (("--layer", "3"), "layer 3: the model has 1 decoder layer (0..0; -1: the last)"),
        (("--head", "al"), "head al: expected 'mean', 'all' or a head index below 2"),
    ):
        result = invoke("attention", tiny_run, "--src", "lo", *args, "-o", tmp_path / "x.png")
        assert result.exit_code == 2 and words in result.output, result.output


def test_attention_refuses_a_suffix_it_cannot_write_before_any_work(tmp_path):
    """Refused before the checkpoint is read: this one does not even exist."""
    result = invoke("attention", tmp_path / "nothing", "--src", "lo", "-o", tmp_path / "x.txt")
    assert result.exit_code == 2
    assert "x.txt: a figure is written as .png, .pdf, .svg" in result.output
    assert list(tmp_path.iterdir()) == []


def test_translate_writes_one_pharaoh_line_per_input_line(tiny_run, toy_dir, tmp_path):
    lines = (toy_dir / "test.src").read_text().splitlines()[:4]
    (tmp_path / "in").write_text(lines[0] + "\n\n" + "\n".join(lines[1:]) + "\n")
    out, links = tmp_path / "hyp", tmp_path / "align"
    result = invoke("translate", tiny_run, "-i", tmp_path / "in", "-o", out, "--alignments", links)
    assert result.exit_code == 0, result.output
    sources = (tmp_path / "in").read_text().splitlines()
    hyps, aligned = out.read_text().splitlines(), links.read_text().splitlines()
    assert len(aligned) == len(hyps) == len(sources) == 5 and aligned[1] == ""
    for src, hyp, line in zip(sources, hyps, aligned):
        pairs = [tuple(map(int, p.split("-"))) for p in line.split()]
        assert all(i < len(src.split()) and j < len(hyp.split()) for i, j in pairs)
        assert sorted({j for _, j in pairs}) == list(range(len(hyp.split())))  # every word
    both = invoke("translate", tiny_run, tiny_run, "--alignments", links, input="a\n")
    assert both.exit_code == 2 and "an ensemble has no single attention" in both.output


def test_quiet_silences_messages_not_warnings(tiny_run, tmp_path, monkeypatch, capsys):
    from nmt import progress

    monkeypatch.setattr(progress.console, "quiet", False)
    monkeypatch.setenv(progress.QUIET, "0")
    loud = invoke("average", tiny_run / "best.pt", "-o", tmp_path / "a.pt")
    assert loud.exit_code == 0 and "the mean of 1 checkpoint" in " ".join(loud.output.split())
    quiet = invoke("--quiet", "average", tiny_run / "best.pt", "-o", tmp_path / "b.pt")
    assert quiet.exit_code == 0 and quiet.output == "" and (tmp_path / "b.pt").is_file()
    assert progress.console.quiet and os.environ[progress.QUIET] == "1"  # for children too
    progress.warn("kept under --quiet")
    assert capsys.readouterr().err == "warning: kept under --quiet\n"


def test_translate_shows_a_bar_when_stdin_is_piped_to_a_file(tiny_run, tmp_path, monkeypatch):
    from nmt import progress

    monkeypatch.setattr(progress.console, "_force_terminal", True)
    monkeypatch.setattr(progress.console, "quiet", False)
    result = invoke("translate", tiny_run, "-o", tmp_path / "out", input="a b\nc\n")
    assert result.exit_code == 0 and "sent/s" in result.output and "ETA" in result.output


@pytest.mark.parametrize(
    "device, message",
    [("gpu", "expected auto, cpu, cuda or cuda:N"), ("cuda:x", "expected auto, cpu, cuda or")],
)
def test_unknown_devices_are_refused(tiny_run, device, message):
    result = invoke("translate", tiny_run, "--device", device, input="a\n")
    assert result.exit_code == 2 and message in result.output


def test_a_gpu_index_without_cuda_is_refused(tiny_run):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: tests/test_cuda.py covers cuda:N")
    result = invoke("translate", tiny_run, "--device", "cuda:0", input="a\n")
    assert result.exit_code == 2 and "--device cuda:0: no CUDA device is available" in result.output


@pytest.mark.slow  # trains, then draws a long sentence: a second or more
def test_attention_says_when_a_sentence_is_cut_to_the_models_positions(tiny_run, tmp_path):
    long = " ".join(["lo"] * 300)  # the tiny model has 256 positions
    for option in ("--src", "--tgt"):
        sides = (
            ["--src", long, "--tgt", "lo"] if option == "--src" else ["--src", "lo", "--tgt", long]
        )
        result = invoke("attention", tiny_run, *sides, "-o", tmp_path / "cut.png")
        out = " ".join(result.output.split())
        assert result.exit_code == 0, result.output
        assert f"{option}: over 255 pieces; the model reads the first 255" in out


def test_score_scores_a_metric_named_twice_once(tmp_path):
    (tmp_path / "h").write_text("a small cat\n")
    (tmp_path / "r").write_text("a small cat\n")
    result = invoke("score", tmp_path / "h", "--ref", tmp_path / "r", "--metrics", "bleu,chrf,bleu")
    assert result.exit_code == 0 and result.output.count("BLEU = ") == 1, result.output
    assert result.output.count("chrF2 = ") == 1


@pytest.mark.parametrize("nproc", ["0", "-1", "100000"])
def test_a_process_count_out_of_range_is_refused_before_training(tiny_recipe, tmp_path, nproc):
    result = invoke("train", tiny_recipe(), "--nproc", nproc, "--device", "cpu")
    assert result.exit_code == 2 and "Invalid value for '--nproc'" in result.output
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "args, line",
    [
        (["translate", "r", "--beam", "abc"],
         "Invalid value for '--beam': 'abc' is not a valid integer. (see nmt translate --help)"),
        (["compare", "s.yaml", "--jobs", "0"],
         "Invalid value for '--jobs': 0 is not in the range 1<=x<=64. (see nmt compare --help)"),
        (["translate", "r", "--bogus"], "No such option: --bogus (see nmt translate --help)"),
        (["trian"], "No such command 'trian'. Did you mean 'train'? (see nmt --help)"),
        (["translate"], "Missing argument 'CHECKPOINTS...'. (see nmt translate --help)"),
        (["data", "bogus"], "No such command 'bogus'. (see nmt data --help)"),
        (["--bogus"], "No such option: --bogus (see nmt --help)"),
    ],
)  # fmt: skip
def test_a_usage_error_is_one_line_naming_the_help(args, line):
    """Typer drew a usage error as a box of five lines; nmt's errors are one line."""
    result = runner.invoke(app, args, prog_name="nmt")
    assert result.exit_code == 2 and result.output == f"error: {line}\n"


@pytest.mark.parametrize("args", [[], ["data"]])
def test_no_arguments_still_show_the_help(args):
    result = runner.invoke(app, args, prog_name="nmt")
    assert result.exit_code == 2 and "Usage: nmt" in result.output and "error:" not in result.output


def test_ranks_on_gpus_that_are_not_there_are_refused_before_any_starts(
    tiny_recipe, tmp_path, monkeypatch
):
    """--nproc 2 --device cuda without CUDA started two ranks, and the error came from
    each among torchrun's lines; the launcher says it once. (The GPUs are what torch
    reports: set here, as this machine may have none.)"""
    monkeypatch.delenv("WORLD_SIZE", raising=False)  # a rank of its own launcher, were it set
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = invoke("train", tiny_recipe(), "--nproc", "2", "--device", "cuda")
    assert result.exit_code == 2
    assert result.output == "error: --device cuda: no CUDA device is available\n"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    result = invoke("train", tiny_recipe(), "--nproc", "2", "--device", "cuda")
    assert result.exit_code == 2 and result.output == (
        "error: --nproc 2: each process trains on a GPU of its own, and 1 is visible "
        "(--device cpu: processes on the CPU)\n"
    )
    assert not (tmp_path / "run").exists()


def test_help_shows_a_flag_as_a_flag():
    """typer's --help must not render a boolean flag as taking a value (typer 0.27
    and later print ``--sample <bool>``: pyproject.toml pins below it)."""
    result = runner.invoke(app, ["translate", "--help"], env={"COLUMNS": "120"})
    (line,) = [x for x in result.output.splitlines() if "--sample " in x]
    assert "bool" not in line.lower() and "Draw each token" in line


@pytest.mark.parametrize(("given", "expect"), [(None, "16"), ("64", "64")])
def test_a_command_keeps_onednns_kernel_cache_small_unless_told(given, expect):
    """``nmt`` sets oneDNN's kernel cache to 16 kernels before anything runs (bf16 on
    a CPU kept one kernel per batch shape), and a user's own setting wins."""
    env = {k: v for k, v in subprocess_env().items() if k != ONEDNN_CACHE[0]}
    if given is not None:
        env[ONEDNN_CACHE[0]] = given
    code = "import os, sys; from nmt.cli import main; sys.argv = ['nmt', '--version']\n"
    code += f"try:\n    main()\nexcept SystemExit:\n    print(os.environ[{ONEDNN_CACHE[0]!r}])"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.split()[-1] == expect, done.stderr[-2000:]
