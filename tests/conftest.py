"""Shared fixtures: a tiny toy corpus, tiny recipes, and the Multi30k location."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import yaml

from nmt.config import from_dict
from nmt.data.toy import write_corpus
from nmt.recipe import RunConfig

if os.environ.get("PYTEST_XDIST_WORKER"):
    # One PyTorch thread per worker (and per process a test starts): workers share
    # the cores, and more threads than cores slowed the suite several-fold.
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)

SHARED_MULTI30K = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "multi30k"


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture(autouse=True, scope="session")
def _data_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Prepared corpora go to a directory of the session, not the user's cache."""
    os.environ["NMT_CACHE_DIR"] = str(tmp_path_factory.mktemp("nmt-cache"))


@pytest.fixture(scope="session")
def toy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small toy corpus (300 training pairs), generated once per test session."""
    out = tmp_path_factory.mktemp("toy")
    write_corpus(out, size=300, seed=7)
    return out


def tiny_recipe_dict(toy_dir: Path, run_dir: Path, **sections: dict) -> dict:
    """A recipe for a model small enough to train in seconds."""
    recipe = {
        "run_dir": str(run_dir),
        "data": {
            "dir": str(toy_dir),
            "src_lang": "src",
            "tgt_lang": "tgt",
            "train": "train",
            "dev": "val",
            "test": ["test"],
            "vocab": {"size": 200},
        },
        "model": {
            "d_model": 32,
            "heads": 2,
            "ffn": 64,
            "encoder_layers": 1,
            "decoder_layers": 1,
            "dropout": 0.1,
            "max_positions": 256,
        },
        "train": {
            "batch_tokens": 512,
            "lr": 3e-3,
            "warmup": 10,
            "max_steps": 6,
            "valid_every": 3,
            "log_every": 2,
            "seed": 3,
        },
        "decode": {"beam": 2, "batch_tokens": 2000},
    }
    for name, values in sections.items():
        recipe[name] = {**recipe.get(name, {}), **values}
    return recipe


@pytest.fixture
def tiny_recipe(toy_dir: Path, tmp_path: Path):
    """Write a tiny recipe to a file; returns a function taking section overrides."""

    def make(**sections: dict) -> Path:
        path = tmp_path / "recipe.yaml"
        path.write_text(yaml.safe_dump(tiny_recipe_dict(toy_dir, tmp_path / "run", **sections)))
        return path

    return make


@pytest.fixture
def tiny_config(toy_dir: Path, tmp_path: Path):
    def make(**sections: dict) -> RunConfig:
        return from_dict(RunConfig, tiny_recipe_dict(toy_dir, tmp_path / "run", **sections))

    return make


@pytest.fixture(scope="session")
def multi30k() -> Path:
    """../shared/data/multi30k; skips without it, fails in CI (NMT_REQUIRE_DATA=1)."""
    if not (SHARED_MULTI30K / "train.de.gz").is_file():
        message = f"Multi30k not found at {SHARED_MULTI30K}"
        if os.environ.get("NMT_REQUIRE_DATA") == "1":
            pytest.fail(message + " (NMT_REQUIRE_DATA=1 forbids skipping)")
        pytest.skip(message)
    return SHARED_MULTI30K


def require_extra(module: str, extra: str):
    """Import an optional extra's module; without it skip, or fail under CI's
    NMT_REQUIRE_DATA=1 (``make test`` installs every extra)."""
    try:
        return __import__(module)
    except ImportError:
        message = f"{module} not installed (pip install 'nmt[{extra}]')"
        if os.environ.get("NMT_REQUIRE_DATA") == "1":
            pytest.fail(message + " (NMT_REQUIRE_DATA=1 forbids skipping)")
        pytest.skip(message)


def write_subprocess_recipe(
    toy_dir: Path, run: Path, model: dict | None = None, **train: object
) -> Path:
    """A tiny recipe file for a training subprocess: no test sets, dev loss decides."""
    recipe = tiny_recipe_dict(
        toy_dir,
        run,
        model=model or {},
        train={"valid_bleu": False, "early_stopping": "loss", **train},
    )
    recipe["data"]["test"] = []
    path = run.parent / f"{run.name}.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def subprocess_env() -> dict[str, str]:
    """The environment for ``python -m nmt`` subprocesses: this checkout importable."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("WORLD_SIZE", None)
    return env


@pytest.fixture(scope="session")
def tiny_run(toy_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory with a briefly trained tiny model (for translate-side tests)."""
    from nmt.training.run import train

    run = tmp_path_factory.mktemp("tiny_run") / "run"
    cfg = from_dict(
        RunConfig, tiny_recipe_dict(toy_dir, run, train={"max_steps": 2, "valid_every": 2})
    )
    train(cfg, device="cpu")
    return run
