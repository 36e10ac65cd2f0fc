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
from nmt.setup.config import ConfigError, from_dict
from nmt.setup.recipe import RunConfig
from nmt.training.run import prepare, train
from nmt.training.state import RunState
from tests.conftest import tiny_recipe_dict

runner = CliRunner()


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_an_update_that_makes_the_weights_infinite_stops_before_any_save(toy_dir, tmp_path):
    """Finite gradients, non-finite weights (the recipe's bounds keep train.lr from
    doing it, so the update here writes an infinity itself): the run stops at the
    next save, and whatever it saved before is finite."""
    train_cfg = {"warmup": 0, "max_steps": 6, "valid_every": 2, "max_epochs": None}
    cfg = from_dict(RunConfig, tiny_recipe_dict(toy_dir, tmp_path / "run", train=train_cfg))
    trainer = prepare(cfg, "cpu")
    update = trainer.optimizer.step

    def exploding() -> None:
        update()
        if trainer.state.step >= 2:  # the third update
            next(trainer.model.parameters()).data.fill_(float("inf"))

    trainer.optimizer.step = exploding
    with pytest.raises(NmtError, match=r"by update [34] the weights are non-finite \(train\.lr"):
        trainer.run()
    for saved in (tmp_path / "run").glob("*.pt"):  # whatever was saved is finite
        weights = checkpoint.load(saved)["model"]  # refuses NaN or infinite weights
        assert all(torch.isfinite(w).all() for w in weights.values() if w.is_floating_point())


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
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
    errors = [line for line in result.output.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "train.lr" in errors[0] and "(0, 10]" in errors[0]


@pytest.mark.parametrize(
    "section, values, key",
    [
        ("model", {"positions": {"cross_alibi": True, "ratio": 1e-300}}, "model.positions.ratio"),
        ("model", {"positions": {"cross_alibi": True, "ratio": 1e300}}, "model.positions.ratio"),
        (
            "model",
            {"attention": {"kind": "local_m", "center": "length_ratio", "ratio": 1e-9}},
            "model.attention.ratio",
        ),
        (
            "model",
            {"attention": {"kind": "hard", "tau": 1e-300, "tau_min": 1e-300}},
            "model.attention.tau",
        ),
        (
            "model",
            {"attention": {"kind": "hard", "entropy_weight": 1e300}},
            "model.attention.entropy_weight",
        ),
        ("model", {"attention": {"kind": "hard", "anneal": 1e300}}, "model.attention.anneal"),
        ("train", {"lr": 1e300}, "train.lr"),
        ("train", {"optimizer": "muon", "muon_lr": 1e300}, "train.muon_lr"),
        ("train", {"eps": 0.0}, "train.eps"),
        ("train", {"eps": -1e-8}, "train.eps"),
        ("train", {"weight_decay": -0.1}, "train.weight_decay"),
        ("train", {"clip_norm": float("inf")}, "train.clip_norm"),
        ("train", {"max_minutes": float("inf")}, "train.max_minutes"),
        ("train", {"max_minutes": float("nan")}, "train.max_minutes"),
        (
            "train",
            {"trainer": {"kind": "scheduled_sampling", "schedule": "linear", "k": 1.0, "c": 1e300}},
            "train.trainer.c",
        ),
    ],
)
def test_a_float_beyond_what_makes_sense_is_refused_naming_its_key(
    toy_dir, tmp_path, section, values, key
):
    """Every must-be-positive float has a bound that makes sense: 1e-300 or 1e300
    passes a "positive" check and wrecks the run later (every update skipped)."""
    recipe = tiny_recipe_dict(toy_dir, tmp_path / "run")
    recipe[section] = recipe.get(section, {}) | values
    with pytest.raises(ConfigError) as e:
        from_dict(RunConfig, recipe)
    assert e.value.key == key, str(e.value)


def test_a_nan_validation_is_never_the_best_and_a_run_with_no_finite_one_fails(toy_dir, tmp_path):
    """A dev loss that is not finite is not kept as best.pt; a run in which no
    validation was finite stops with one line instead of exiting 0 with an untrained
    best.pt."""
    s = RunState(step=10)
    assert not s.improved({"valid_loss": float("nan"), "valid_bleu": 0.0}, "bleu")
    assert not s.improved({"valid_loss": float("nan")}, "loss") and s.best is None
    assert s.bad_evals == 2
    cfg = from_dict(RunConfig, tiny_recipe_dict(toy_dir, tmp_path / "run"))
    trainer = prepare(cfg, "cpu")
    trainer.validate = lambda *a, **k: {"valid_loss": float("nan"), "valid_bleu": 0.0}
    with pytest.raises(NmtError, match=r"no validation gave a finite dev loss \(the last: nan\)"):
        trainer.run()
    assert not (tmp_path / "run" / "best.pt").exists()
