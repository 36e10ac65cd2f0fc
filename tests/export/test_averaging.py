"""Checkpoint averaging: the mean of every tensor; kept checkpoints; average_last."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from nmt.cli import app
from nmt.data.vocab import Vocab
from nmt.decoding.evaluate import evaluate
from nmt.errors import NmtError
from nmt.export.averaging import average, average_into, kept_checkpoints
from nmt.io import checkpoint
from nmt.setup.config import from_dict
from nmt.setup.recipe import RunConfig
from nmt.training.run import train
from tests.conftest import tiny_recipe_dict

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def tiny_run(toy_dir, run_dir, model=None, **train_keys):
    cfg = from_dict(
        RunConfig, tiny_recipe_dict(toy_dir, run_dir, model=model or {}, train=train_keys)
    )
    train(cfg, device="cpu")
    return run_dir


@pytest.fixture(scope="module")
def kept_run(toy_dir, tmp_path_factory):
    """A tiny run keeping its last 2 of 3 validation checkpoints."""
    run = tmp_path_factory.mktemp("kept") / "run"
    return tiny_run(toy_dir, run, max_steps=6, valid_every=2, keep_checkpoints=2)


def with_average_last(kept_run, run, n):
    """A copy of ``kept_run`` whose recipe asks for ``decode.average_last: n``."""
    run.mkdir(exist_ok=True)
    for path in kept_checkpoints(kept_run):  # the vocabulary travels in the checkpoint
        (run / path.name).write_bytes(path.read_bytes())
    best = checkpoint.load(kept_run / "best.pt")
    best["config"]["decode"]["average_last"] = n
    checkpoint.save(run / "best.pt", {k: v for k, v in best.items() if k != "format"})
    return run


def test_a_run_keeps_its_last_checkpoints(kept_run):
    assert [p.name for p in kept_checkpoints(kept_run)] == ["step-4.pt", "step-6.pt"]
    last = checkpoint.load(kept_run / "last.pt")["model"]
    kept = checkpoint.load(kept_run / "step-6.pt")
    assert "optimizer" not in kept
    for k, v in last.items():
        assert torch.equal(kept["model"][k], v), k


def test_averaging_copies_of_one_checkpoint_returns_it(kept_run):
    path = kept_run / "step-4.pt"
    averaged = average([path, path, path])["model"]
    for k, v in checkpoint.load(path)["model"].items():
        assert torch.equal(averaged[k], v), k


def test_averaging_two_gives_the_mean_of_every_tensor(kept_run):
    a, b = (checkpoint.load(kept_run / f"step-{s}.pt")["model"] for s in (4, 6))
    averaged = average([kept_run / "step-4.pt", kept_run / "step-6.pt"])["model"]
    floats = [k for k, v in a.items() if v.is_floating_point()]
    assert floats and any(not torch.equal(a[k], b[k]) for k in floats)
    for k in floats:
        torch.testing.assert_close(averaged[k], (a[k] + b[k]) / 2, rtol=0, atol=1e-7)


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_evaluate_scores_the_average_that_nmt_average_writes(kept_run, tmp_path, toy_dir):
    run = with_average_last(kept_run, tmp_path / "run", 2)
    evaluate(run, ["test"], device="cpu")
    result = invoke("average", run, "--last", 2, "-o", tmp_path / "avg.pt")
    assert result.exit_code == 0, result.output
    result = invoke("translate", tmp_path / "avg.pt", "-i", toy_dir / "test.src")
    assert result.exit_code == 0, result.output
    assert result.stdout == (run / "test.hyp").read_text()  # the same model, the same beam


def test_average_last_needs_that_many_kept_checkpoints(kept_run, tmp_path):
    run = with_average_last(kept_run, tmp_path / "run", 3)
    with pytest.raises(NmtError, match=r"decode\.average_last: 3 needs train\.keep_checkpoints"):
        evaluate(run, ["test"], device="cpu")  # a recipe that could not ask for this now
    result = invoke("average", kept_run, "--last", 5, "-o", tmp_path / "o.pt")
    assert result.exit_code == 2 and "the run kept 2" in result.output


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_average_refuses_damaged_and_foreign_checkpoints(kept_run, tmp_path, toy_dir):
    out = tmp_path / "o.pt"
    bad = tmp_path / "bad.pt"
    bad.write_bytes((kept_run / "step-4.pt").read_bytes()[:100])
    result = invoke("average", kept_run / "step-4.pt", bad, "-o", out)
    assert result.exit_code == 2 and str(bad) in result.output
    other = tiny_run(
        toy_dir, tmp_path / "other", {"ffn": 48}, max_steps=1, valid_every=1, keep_checkpoints=1
    )
    result = invoke("average", kept_run / "step-4.pt", other / "step-1.pt", "-o", out)
    assert result.exit_code == 2 and "another model's checkpoint" in result.output
    assert not out.exists()


def another_vocabulary(payload) -> bytes:
    """A SentencePiece model of the same size trained on other text."""
    size = Vocab(payload["vocab"]["src"]).sp.get_piece_size()
    text = [" ".join(f"w{i % 97}{j}" for j in range(i % 13 + 1)) for i in range(3000)]
    return Vocab.train(text, size, "unigram").model


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
@pytest.mark.parametrize(
    "change, expect",
    [
        (lambda p: p["config"]["train"].update(seed=99), "another run than"),
        (lambda p: p["vocab"].update(src=another_vocabulary(p)), "another vocabulary than"),
    ],
    ids=["another seed", "another vocabulary"],
)
def test_average_refuses_another_run_of_the_same_model(kept_run, tmp_path, change, expect):
    """Same shapes and model settings, yet not one run: the mean would be no model."""
    payload = checkpoint.load(kept_run / "step-4.pt")
    change(payload)
    other = tmp_path / "other.pt"
    checkpoint.save(other, {k: v for k, v in payload.items() if k != "format"})
    result = invoke("average", kept_run / "step-6.pt", other, "-o", tmp_path / "o.pt")
    assert result.exit_code == 2 and expect in result.output, result.output
    assert not (tmp_path / "o.pt").exists()


def test_a_run_directory_needs_last(kept_run, tmp_path):
    result = invoke("average", kept_run, "-o", tmp_path / "o.pt")
    assert result.exit_code == 2 and "a run directory; add --last N" in result.output
    assert not (tmp_path / "o.pt").exists()


def test_a_checkpoint_named_twice_is_refused(kept_run, tmp_path):
    (tmp_path / "link.pt").symlink_to(kept_run / "step-4.pt")
    for twice in (kept_run / "step-4.pt", tmp_path / "link.pt"):
        result = invoke("average", kept_run / "step-4.pt", kept_run / "step-6.pt", twice,
                        "-o", tmp_path / "o.pt")  # fmt: skip
        assert result.exit_code == 2 and f"{twice}: named twice" in result.output, result.output
    same = kept_run / "step-4.pt"  # one Path object twice, as a caller from Python passes it
    with pytest.raises(NmtError, match="named twice"):
        average_into([same, same], None, tmp_path / "o.pt")
    assert not (tmp_path / "o.pt").exists()


@pytest.mark.parametrize("name", ["best.pt", "last.pt", "step-6.pt"])
def test_the_average_never_replaces_a_runs_own_checkpoint(kept_run, name):
    before = (kept_run / name).read_bytes()
    result = invoke("average", kept_run, "--last", 2, "-o", kept_run / name)
    assert result.exit_code == 2 and "the run's own checkpoint" in result.output
    assert (kept_run / name).read_bytes() == before


def test_the_average_carries_the_newest_checkpoints_state(kept_run):
    """Whatever order they come in, the last path named is the newest: its run state
    (step, epoch) is what the average carries, and the paths are listed in order."""
    paths = [kept_run / "step-6.pt", kept_run / "step-4.pt", kept_run / "step-6.pt"]
    for order in (paths, paths[1:]):
        averaged = average(order)
        assert averaged["state"] == checkpoint.load(order[-1])["state"]
        assert averaged["averaged"] == [str(p) for p in order]
    assert average(paths[:2])["state"]["step"] == 4


def test_the_average_may_be_written_beside_the_runs_checkpoints(kept_run):
    """What the refusal above advises: RUN/avg.pt is no checkpoint the run owns."""
    out = kept_run / "avg.pt"
    result = invoke("average", kept_run, "--last", 2, "-o", out)
    assert result.exit_code == 0, result.output
    assert checkpoint.load(out)["averaged"] == [str(p) for p in kept_checkpoints(kept_run)]
    out.unlink()


@pytest.mark.parametrize("inputs", ["a checkpoint", "two runs"])
def test_last_takes_exactly_one_run_directory(kept_run, tmp_path, inputs):
    named = [kept_run / "step-4.pt"] if inputs == "a checkpoint" else [kept_run, kept_run]
    result = invoke("average", *named, "--last", 2, "-o", tmp_path / "o.pt")
    assert result.exit_code == 2 and "--last: give one run directory" in result.output
    assert not (tmp_path / "o.pt").exists()
