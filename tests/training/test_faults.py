"""Faults during training: signals, non-finite losses, a full disk, an unwritable run dir."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
import torch

from nmt.errors import NmtError
from nmt.io import checkpoint, files
from nmt.training.build import build
from nmt.training.run import train
from nmt.training.signals import Interrupted
from nmt.training.trainer import Trainer
from tests.conftest import as_in_a_terminal, as_in_the_background, training_until_logged


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_saves_last_and_says_how_to_resume(toy_dir, tmp_path, sig, code):
    run = tmp_path / "run"
    proc = training_until_logged(toy_dir, run, preexec_fn=as_in_a_terminal)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err.decode()[-2000:]
    assert b"Continue with: nmt train RECIPE --resume" in err and b"Traceback" not in err
    assert checkpoint.load(run / "last.pt")["state"]["step"] >= 1


@pytest.mark.slow
def test_a_background_run_ignores_sigint_and_stops_on_sigterm(toy_dir, tmp_path):
    """Started with SIGINT ignored (``nmt train ... &`` in a script, or nohup), the
    run keeps ignoring it, as shells expect of background jobs; SIGTERM still saves
    last.pt and stops it."""
    run = tmp_path / "run"
    proc = training_until_logged(toy_dir, run, preexec_fn=as_in_the_background)
    logged = (run / "metrics.jsonl").read_bytes().count(b"\n")
    proc.send_signal(signal.SIGINT)
    deadline = time.time() + 60  # still training: more updates logged after it
    while (run / "metrics.jsonl").read_bytes().count(b"\n") < logged + 5:
        assert proc.poll() is None, proc.stderr.read().decode()  # it ended: its output
        if time.time() > deadline:
            proc.kill()
            raise AssertionError("no update logged in 60 s after SIGINT")
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err.decode()[-2000:]
    assert checkpoint.load(run / "last.pt")["state"]["step"] >= 1


class Exploding(torch.nn.Module):
    """The trainer's objective, with a NaN loss on the (1-based) steps in ``bad``."""

    def __init__(self, objective: torch.nn.Module, bad: set[int]) -> None:
        super().__init__()
        self.inner, self.bad = objective, bad

    def forward(self, batch, step):
        loss = self.inner(batch, step)
        return loss._replace(total=loss.total * float("nan")) if step + 1 in self.bad else loss

    def summary(self, step_seconds):
        return {}


def exploding(cfg, bad: set[int]) -> Trainer:
    trainer = Trainer(*build(cfg, print))
    trainer.objective = Exploding(trainer.objective, bad)
    return trainer


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_non_finite_steps_are_skipped_and_logged(tiny_config):
    cfg = tiny_config(train={"max_steps": 6, "valid_every": 3})
    trainer = exploding(cfg, {2, 3})
    before = {}

    original = trainer.train_step

    def spy(batches):
        if trainer.state.step + 1 == 2:
            before.update({k: v.clone() for k, v in trainer.model.state_dict().items()})
        result = original(batches)
        if trainer.state.step + 1 == 3:  # after the skipped steps 2 and 3
            for k, v in trainer.model.state_dict().items():
                assert torch.equal(v, before[k]), k
        return result

    trainer.train_step = spy
    trainer.run()
    records = [json.loads(x) for x in open(f"{cfg.run_dir}/metrics.jsonl")]
    assert [r["step"] for r in records if r.get("skipped")] == [2, 3]
    assert checkpoint.load(f"{cfg.run_dir}/last.pt")["state"]["step"] == 6


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_too_many_non_finite_steps_stop_the_run_and_keep_the_checkpoint(tiny_config):
    cfg = tiny_config(train={"max_steps": 20, "valid_every": 2, "max_bad_steps": 3})
    trainer = exploding(cfg, set(range(5, 100)))
    with pytest.raises(NmtError, match="3 consecutive non-finite losses"):
        trainer.run()
    last = checkpoint.load(f"{cfg.run_dir}/last.pt")
    assert last["state"]["step"] == 6  # saved after skipped updates: still the step-4 weights
    assert all(torch.isfinite(v).all() for v in last["model"].values() if v.is_floating_point())


class SlowValidation(Trainer):
    """A validation that would decode for a minute, signalled as it starts."""

    def validate(self, progress=None):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)
        return super().validate(progress)


def test_a_signal_during_validation_stops_the_run_at_once(tiny_config):
    cfg = tiny_config(train={"max_steps": 6, "valid_every": 2})
    trainer = SlowValidation(*build(cfg, print))
    found = signal.getsignal(signal.SIGTERM)
    start = time.perf_counter()
    with pytest.raises(Interrupted) as e:
        trainer.run()
    assert time.perf_counter() - start < 20 and e.value.code == 143
    assert checkpoint.load(f"{cfg.run_dir}/last.pt")["state"]["step"] == 2
    assert signal.getsignal(signal.SIGTERM) is found  # handlers restored


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
@pytest.mark.parametrize("error", ["OSError", "RuntimeError"])
def test_disk_full_keeps_the_previous_checkpoint(tiny_config, monkeypatch, error):
    """PyTorch's writer reports a full disk as a RuntimeError, Python as OSError 28:
    either way one line naming the file and "no space left", the previous intact."""
    cfg = tiny_config(train={"max_steps": 4, "valid_every": 2})
    original, saves = torch.save, []

    def save(obj, f, *args, **kwargs):
        saves.append(1)
        if len(saves) > 2:  # best.pt and last.pt at step 2 succeed; then the disk is full
            if error == "OSError":
                raise OSError(28, "No space left on device")
            raise RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed")
        return original(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save)
    if error == "RuntimeError":  # and the disk is indeed full
        full = shutil._ntuple_diskusage(10**9, 10**9, 0)
        monkeypatch.setattr(shutil, "disk_usage", lambda path: full)
    with pytest.raises(NmtError, match=r"(last|best)\.pt: cannot write \(No space left on"):
        train(cfg, device="cpu")
    assert checkpoint.load(f"{cfg.run_dir}/last.pt")["state"]["step"] == 2
    assert not list(Path(cfg.run_dir).glob(".*.tmp"))


def test_a_failed_metrics_append_leaves_no_torn_line(tmp_path, monkeypatch):
    path = tmp_path / "metrics.jsonl"
    files.append_line(path, json.dumps({"step": 1}))
    real_write = os.write

    def half(fd, data):  # the disk fills in the middle of the line
        real_write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half)
    with pytest.raises(NmtError, match=r"metrics\.jsonl: cannot write \(No space left"):
        files.append_line(path, json.dumps({"step": 2, "loss": 1.5}))
    assert path.read_text() == '{"step": 1}\n'


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_out_of_memory_names_the_key_and_the_run_resumes(tiny_config, monkeypatch):
    cfg = tiny_config(train={"max_steps": 6, "valid_every": 2})
    original = Trainer.train_step

    def train_step(self, batches):
        if self.state.step == 2:
            raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate")
        return original(self, batches)

    monkeypatch.setattr(Trainer, "train_step", train_step)
    with pytest.raises(
        NmtError,
        match=r"out of memory at step 3 .*lower train\.batch_tokens.*"
        r"--resume \(last\.pt is at step 2\)",
    ):
        train(cfg, device="cpu")
    monkeypatch.setattr(Trainer, "train_step", original)
    train(cfg, device="cpu", resume=True)
    assert checkpoint.load(f"{cfg.run_dir}/last.pt")["state"]["step"] == 6


def test_unwritable_run_dir(tiny_config, tmp_path):
    (tmp_path / "a_file").write_text("x")
    cfg = tiny_config()
    cfg = type(cfg)(**{**cfg.__dict__, "run_dir": str(tmp_path / "a_file" / "run")})
    with pytest.raises(NmtError, match=r"run_dir: .*a_file/run: cannot create"):
        train(cfg, device="cpu")


def test_a_run_dir_that_is_a_file_is_named(tiny_config, tmp_path):
    (tmp_path / "a_file").write_text("x")
    cfg = tiny_config()
    cfg = type(cfg)(**{**cfg.__dict__, "run_dir": str(tmp_path / "a_file")})
    with pytest.raises(NmtError, match=r"run_dir: .*a_file: a file, not a directory"):
        train(cfg, device="cpu")
    assert (tmp_path / "a_file").read_text() == "x"


class StoppedInValidation(Trainer):
    """Signalled as the validation at step ``at`` starts: the validation is cut short."""

    at = 0

    def validate(self, progress=None):
        if self.state.step == self.at:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(60)
        return super().validate(progress)


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
@pytest.mark.parametrize(
    ("valid_every", "at"),
    [(2, 6), (10, 6), (2, 4)],
    ids=["the last, due by the schedule", "the last, past the schedule", "one before the last"],
)
def test_a_run_stopped_in_a_validation_resumes_to_the_uninterrupted_answer(
    toy_dir, tmp_path, valid_every, at
):
    """A stop inside a validation (its budget already spent when it is the last)
    leaves it owed: the resume runs it first, so best.pt, the validations logged and
    the run's summary are those of the run never stopped."""
    from nmt.setup.config import from_dict
    from nmt.setup.recipe import RunConfig
    from nmt.training.run import prepare
    from tests.conftest import tiny_recipe_dict

    def config(run):
        train = {"max_steps": 6, "valid_every": valid_every, "max_epochs": None}
        return from_dict(RunConfig, tiny_recipe_dict(toy_dir, tmp_path / run, train=train))

    whole = prepare(config("whole"), "cpu").run()
    cfg = config("stopped")
    StoppedInValidation.at = at
    with pytest.raises(Interrupted):
        StoppedInValidation(*build(cfg, print)).run()
    resumed = prepare(cfg, "cpu", resume=True).run()
    assert resumed["best_step"] == whole["best_step"] and resumed["steps"] == 6

    def validations(run):
        records = (tmp_path / run / "metrics.jsonl").read_text().splitlines()
        found = [json.loads(r) for r in records if "valid_loss" in r]
        return [(r["step"], round(r["valid_loss"], 5)) for r in found]

    assert validations("stopped") == validations("whole")
    best = [checkpoint.load(tmp_path / run / "best.pt")["model"] for run in ("whole", "stopped")]
    assert all(torch.equal(best[0][k], best[1][k]) for k in best[0])
