"""One process per run directory; a resume continues the run its checkpoint describes;
a stored vocabulary is reused only for the settings that made it."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.errors import NmtError
from nmt.io import checkpoint
from nmt.io.rundir import LOCK, owned
from nmt.setup.config import from_dict
from nmt.setup.recipe import RunConfig
from nmt.training.run import train
from tests.conftest import subprocess_env, tiny_recipe_dict

runner = CliRunner()


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_a_second_process_is_refused_naming_the_owner(tiny_recipe, tmp_path):
    """While one process owns the run directory, ``nmt train`` there (fresh or
    ``--resume``) exits 2 naming the directory and the owner's pid, and writes nothing."""
    recipe = tiny_recipe()
    run = tmp_path / "run"
    with owned(run):
        owner = (run / LOCK).read_text().strip()
        for extra in ([], ["--resume"]):
            result = runner.invoke(app, ["train", str(recipe), *extra])
            assert result.exit_code == 2, result.output
            assert f"in use by another nmt process (pid {owner})" in result.output
        assert sorted(p.name for p in run.iterdir()) == [LOCK]
    assert runner.invoke(app, ["train", str(recipe)]).exit_code == 0  # released


def test_a_killed_owner_leaves_no_stale_lock(tmp_path):
    run = tmp_path / "run"
    code = (
        "import sys, time; from pathlib import Path; from nmt.io.rundir import owned\n"
        f"with owned(Path({str(run)!r})):\n    print('held', flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, env=subprocess_env()
    )
    assert proc.stdout.readline().strip() == b"held"
    with pytest.raises(NmtError, match=f"pid {proc.pid}"), owned(run):
        pass
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with owned(run):  # the kernel released the lock with the process
        pass


def resumed(toy_dir, run, **sections):
    return from_dict(RunConfig, tiny_recipe_dict(toy_dir, run, **sections))


REFUSED = {
    "model.d_model": {"model": {"d_model": 64}},
    "model.heads": {"model": {"heads": 4}},
    "model.attention.kind": {"model": {"attention": {"kind": "local_m"}}},
    "train.trainer.kind": {"train": {"trainer": {"kind": "scheduled_sampling"}}},
    "model.dropout": {"model": {"dropout": 0.3}},
    "train.seed": {"train": {"seed": 9}},
    "train.batch_tokens": {"train": {"batch_tokens": 1024}},
    "data.vocab.size": {"data": {"vocab": {"size": 300}}},
}


@pytest.fixture(scope="module")
def two_steps(toy_dir, tmp_path_factory):
    run = tmp_path_factory.mktemp("resume") / "run"
    train(resumed(toy_dir, run, train={"max_steps": 2, "valid_every": 2}), device="cpu")
    return run


@pytest.mark.parametrize("key", REFUSED)
def test_resume_refuses_a_changed_model_data_or_optimisation(key, two_steps, toy_dir):
    """Named with its old and new value, before anything in the run is rewritten."""
    sections = REFUSED[key]
    if key == "data.vocab.size":
        sections = {"data": {**tiny_recipe_dict(toy_dir, two_steps)["data"], **sections["data"]}}
    before = {p.name: p.read_bytes() for p in two_steps.iterdir() if p.is_file()}
    with pytest.raises(NmtError, match=rf"changes the run: (.*; )?{key} .* -> "):
        train(resumed(toy_dir, two_steps, **sections), device="cpu", resume=True)
    after = {p.name: p.read_bytes() for p in two_steps.iterdir() if p.is_file()}
    assert after == before


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_resume_accepts_run_time_keys_and_says_what_changed(two_steps, toy_dir, tmp_path, capsys):
    run = tmp_path / "copy"
    run.mkdir()
    for p in two_steps.iterdir():
        (run / p.name).write_bytes(p.read_bytes())
    cfg = resumed(toy_dir, run, train={"max_steps": 4, "valid_every": 2}, decode={"beam": 3})
    train(cfg, device="cpu", resume=True)
    out = capsys.readouterr().err
    assert "train.max_steps 2 -> 4" in out and "decode.beam 2 -> 3" in out
    assert checkpoint.load(run / "last.pt")["state"]["step"] == 4
    assert yaml.safe_load((run / "recipe.yaml").read_text())["train"]["max_steps"] == 4


DAMAGED_LAST = {  # how last.pt is damaged -> what the error says
    "no optimizer": (lambda p: p.pop("optimizer"), "not a usable checkpoint: no 'optimizer' entry"),
    "optimizer": (lambda p: p.update(optimizer={"state": 5}), "state has no list of parts"),
    "optimizer part": (
        lambda p: p.update(optimizer={"parts": [{"state": 5}]}),
        "(no 'param_groups' entry)",
    ),
    "rng": (lambda p: p.update(rng=[{"torch": torch.zeros(3)}]), "must be a torch.ByteTensor"),
    "state key": (lambda p: p["state"].update(zzz=1), "(zzz: unknown key)"),
    "state type": (lambda p: p["state"].update(step="x"), "(step: expected an integer"),
    "NaN": (lambda p: p["model"]["output.weight"].fill_(float("nan")), "NaN or infinite"),
}


@pytest.mark.parametrize("damage", DAMAGED_LAST)
def test_resume_from_a_damaged_last_checkpoint_names_it_and_changes_nothing(
    damage, two_steps, toy_dir, tmp_path
):
    """Each used to raise a KeyError or TypeError traceback, or (NaN) to train on."""
    run = tmp_path / "copy"
    shutil.copytree(two_steps, run)
    payload = torch.load(run / "last.pt", weights_only=True)
    edit, words = DAMAGED_LAST[damage]
    edit(payload)
    torch.save(payload, run / "last.pt")
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    cfg = resumed(toy_dir, run, train={"max_steps": 4, "valid_every": 2})
    with pytest.raises(NmtError, match=re.escape(str(run / "last.pt")) + ": ") as e:
        train(cfg, device="cpu", resume=True)
    assert words in str(e.value)
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


def test_a_run_refused_before_writing_leaves_no_directory(tiny_recipe, tmp_path):
    """A pre-check that fails once the run directory is taken (here the TensorBoard
    directory, a file) used to leave the new directory holding only its lock."""
    (tmp_path / "tb").write_text("a file")
    run = tmp_path / "new" / "run"
    train_cfg = {"log_to": ["jsonl", "tensorboard"], "tensorboard_dir": str(tmp_path / "tb")}
    recipe = tiny_recipe(train=train_cfg)
    result = runner.invoke(app, ["train", str(recipe), "--set", f"run_dir={run}"])
    assert result.exit_code == 2 and "tensorboard_dir" in result.output
    assert not run.exists()


def test_a_refused_run_keeps_a_directory_that_was_there(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with pytest.raises(RuntimeError), owned(run):
        raise RuntimeError("refused")
    assert run.is_dir()
