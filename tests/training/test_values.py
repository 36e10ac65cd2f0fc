"""Values that pass the recipe's checks and would fail later (issue #52, class 4):
each is a one-line error at the first moment it can be known, nothing saved from it."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from nmt.cli import app
from nmt.data.splits import derive
from nmt.errors import NmtError
from nmt.io import checkpoint
from nmt.setup.config import from_dict
from nmt.setup.recipe import RunConfig
from nmt.training.run import prepare, train
from tests.conftest import tiny_recipe_dict

runner = CliRunner()


def test_a_learning_rate_that_makes_the_weights_infinite_stops_before_any_save(toy_dir, tmp_path):
    train_cfg = {"lr": 1e300, "warmup": 0, "max_steps": 6, "valid_every": 2, "max_epochs": None}
    cfg = from_dict(RunConfig, tiny_recipe_dict(toy_dir, tmp_path / "run", train=train_cfg))
    with pytest.raises(NmtError, match=r"weights are non-finite \(train\.lr 1e\+300"):
        train(cfg, device="cpu")
    for saved in (tmp_path / "run").glob("*.pt"):  # whatever was saved is finite
        weights = checkpoint.load(saved)["model"]  # refuses NaN or infinite weights
        assert all(torch.isfinite(w).all() for w in weights.values() if w.is_floating_point())


def test_resuming_a_decaying_schedule_with_another_budget_is_refused(toy_dir, tmp_path):
    def config(steps):
        t = {"lr_schedule": "cosine", "warmup": 1, "max_steps": steps, "valid_every": 2}
        return from_dict(RunConfig, tiny_recipe_dict(toy_dir, tmp_path / "run", train=t))

    train(config(4), device="cpu")
    with pytest.raises(NmtError, match=r"train\.max_steps 4 -> 8: under train\.lr_schedule cosine"):
        prepare(config(8), "cpu", resume=True)
    prepare(config(4), "cpu", resume=True)  # its own budget resumes


def test_an_absurd_split_suffix_is_one_line():
    for split in ("test*" + "9" * 5000, "train>" + "1" * 5000):
        with pytest.raises(NmtError, match="must be at most 999,999,999"):
            derive(split, ["a"], ["b"])
    assert derive("test*000000000002", ["a", "b"], ["c", "d"]) == (["a b"], ["c d"])


def test_train_max_words_that_holds_out_every_pair_names_itself(toy_dir, tmp_path):
    """Every training pair (nothing to learn a vocabulary from), or every dev pair
    (nothing to validate on): one line naming the key, not the tokenizer's error or
    model.max_positions."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for side in ("src", "tgt"):
        train = (toy_dir / f"train.{side}").read_text()
        (corpus / f"train.{side}").write_text(train)
        long = [" ".join(["lo"] * 30)] * 5  # the dev pairs: 30 source words each
        (corpus / f"val.{side}").write_text("\n".join(long) + "\n")
    recipe = tiny_recipe_dict(toy_dir, tmp_path / "run", data={"dir": str(corpus), "test": []})
    recipe["data"]["cache_dir"] = str(tmp_path / "cache")
    for n, what in ((1, "every training pair"), (20, "every one of the 5 dev pairs")):
        recipe["data"]["train_max_words"] = n
        with pytest.raises(NmtError, match=rf"data\.train_max_words {n}: holds out {what}"):
            prepare(from_dict(RunConfig, recipe), "cpu")


def test_a_checkpoint_in_torchs_legacy_format_loads(tiny_run, tmp_path):
    payload = checkpoint.load(tiny_run / "best.pt")
    legacy = tmp_path / "legacy.pt"
    torch.save(payload, legacy, _use_new_zipfile_serialization=False)
    loaded = checkpoint.load(legacy)
    assert all(torch.equal(loaded["model"][k], v) for k, v in payload["model"].items())
    legacy.write_bytes(legacy.read_bytes()[:-100])  # truncated: still one line
    with pytest.raises(NmtError, match="truncated or corrupt"):
        checkpoint.load(legacy)


def test_the_command_line_says_it_in_one_line(tiny_recipe, tmp_path):
    recipe = tiny_recipe(train={"lr": 1e300, "warmup": 0, "max_steps": 4, "valid_every": 2})
    result = runner.invoke(app, ["train", str(recipe), "--device", "cpu"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert [line for line in result.output.splitlines() if line.startswith("error")] == [
        next(line for line in result.output.splitlines() if "non-finite" in line)
    ]
