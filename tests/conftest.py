"""Shared fixtures: a tiny toy corpus, tiny recipes, the Multi30k location, and a
guard that keeps every test from leaking process state into the next."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
import torch
import yaml

from nmt import install_hint
from nmt.attention.base import SCORES
from nmt.compare.metrics import METRICS
from nmt.data.toy import write_corpus
from nmt.progress import QUIET, console, flag
from nmt.setup import plugins
from nmt.setup.allocator import allocator_named, library_dirs, restart_environment
from nmt.setup.attention import ATTENTION
from nmt.setup.compare import LAUNCHERS
from nmt.setup.config import from_dict
from nmt.setup.decoding import REMEDIES
from nmt.setup.model import DECODERS, ENCODER_BLOCKS, POSITIONS
from nmt.setup.recipe import RunConfig
from nmt.setup.training import TRAINERS

# a run that never reports a test it collected fails and names it; --cpu-times FILE
# writes what each test costs (the slow marker's rule)
pytest_plugins = ("tests.completeness", "tests.cpu_times")

if os.environ.get("PYTEST_XDIST_WORKER"):
    # One PyTorch thread per worker (and per process a test starts): workers share
    # the cores, and more threads than cores slowed the suite several-fold.
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)

# rich takes stderr for a terminal wherever these say so (many CI systems set
# FORCE_COLOR), and nmt then draws bars where the tests read a log's plain lines; a
# shell's NMT_QUIET silences the messages they read. The suite, and every process it
# starts, sees stderr as it is and says what it says (a test of quiet sets it itself).
for name in ("FORCE_COLOR", "TTY_COMPATIBLE", QUIET):
    os.environ.pop(name, None)
console.quiet = False  # nmt.progress read NMT_QUIET when it was imported, above

SHARED_MULTI30K = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "multi30k"


# The signals whose handlers a test could leave changed (the training loop's
# StopSignals installs the first two).
GUARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


# Variables that others set in the process, not the tests: pytest names the current
# test in one; torch keeps its compile cache's process-wide place in the others, set
# whenever torch._inductor first asks for it (an import of torch.nn.attention.bias
# can be that moment, so it falls in whichever test imports it first); scikit-learn
# (which the mlflow extra brings, and compare-mt imports where it is installed) sets
# two OpenMP variables when it is first imported.
NOT_THE_TESTS = (
    "PYTEST_CURRENT_TEST", "_TORCHINDUCTOR_", "TORCHINDUCTOR_CACHE_DIR",
    "KMP_DUPLICATE_LIB_OK", "KMP_INIT_AT_FORK",
)  # fmt: skip


# Every table a plug-in adds to besides the study metrics' (tests/setup/test_registry.py
# checks that none is missing; each holds its built-ins once imported, above): what a
# test's plug-in registers in this process is the test's alone.
REGISTRIES = (ATTENTION, SCORES, POSITIONS, ENCODER_BLOCKS, DECODERS, REMEDIES, LAUNCHERS, TRAINERS)


class PluginsKnown(NamedTuple):
    """What :func:`_forget_plugins` puts back: the names each registry and the
    metrics' table hold, the plug-ins imported (and the files standing in for stored
    ones), the modules loaded."""

    names: list[set[str]]  # one per registry of REGISTRIES
    metrics: set[str]
    loaded: set[str]
    stand_ins: dict[str, str]
    modules: set[str]


def _plugins_known() -> PluginsKnown:
    return PluginsKnown(
        [set(r.names()) for r in REGISTRIES],
        set(METRICS),
        set(plugins._loaded),
        dict(plugins._stand_ins),
        set(sys.modules),
    )


def _forget_plugins(known: PluginsKnown) -> None:
    """Unregister what plug-ins registered since ``known`` and forget that they were
    imported (a later test that imports one gets its entries again)."""
    for registry, before in zip(REGISTRIES, known.names):
        for name in set(registry.names()) - before:
            registry.unregister(name)
    for key in set(METRICS) - known.metrics:
        del METRICS[key]
    imported = plugins._loaded - known.loaded
    for module in set(sys.modules) - known.modules:
        if module.startswith("nmt_plugin_") or module in imported:
            del sys.modules[module]
    plugins._loaded.clear()
    plugins._loaded.update(known.loaded)
    plugins._stand_ins.clear()
    plugins._stand_ins.update(known.stand_ins)


def _torch_modes() -> tuple[bool, torch.dtype, bool]:
    """torch's process-wide modes a test could leave set: autograd on, the default
    floating dtype, deterministic algorithms."""
    return (
        torch.is_grad_enabled(),
        torch.get_default_dtype(),
        torch.are_deterministic_algorithms_enabled(),
    )


def _set_torch_modes(modes: tuple[bool, torch.dtype, bool]) -> None:
    torch.set_grad_enabled(modes[0])
    torch.set_default_dtype(modes[1])
    torch.use_deterministic_algorithms(modes[2])


def _environment() -> dict[str, str]:
    """The environment, less the variables that others set (``NOT_THE_TESTS``)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(NOT_THE_TESTS)}


@pytest.fixture(autouse=True)
def _isolated() -> object:
    """Each test starts from the same process state whatever ran before it, in
    whatever order (pytest-randomly shuffles them) and however the suite was started.

    Global RNG states (Python, NumPy, torch) are put back after the test and torch's
    is seeded before it; so are the registries, without what a plug-in the test
    imported registered in them (a kind a test's plug-in adds is unknown to the next
    test, as to a fresh process). Signal handlers, environment variables, the working
    directory, torch's thread count and its modes are checked after the test: a test
    that changed one fails, naming it, and the value is put back so that the next
    test is not affected (tests/test_isolation.py)."""
    rng = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    handlers = {sig: signal.getsignal(sig) for sig in GUARDED_SIGNALS}
    env, cwd, threads = _environment(), os.getcwd(), torch.get_num_threads()
    known, modes = _plugins_known(), _torch_modes()
    torch.manual_seed(0)
    yield
    _forget_plugins(known)
    random.setstate(rng[0])
    np.random.set_state(rng[1])
    torch.set_rng_state(rng[2])
    leaked = []
    for sig, handler in handlers.items():
        if signal.getsignal(sig) != handler:
            leaked.append(f"the {signal.Signals(sig).name} handler")
            signal.signal(sig, handler)
    now = _environment()
    if changed := sorted(k for k in env.keys() | now.keys() if env.get(k) != now.get(k)):
        leaked.append(f"the environment variables {', '.join(changed)}")
        for key in changed:
            if key in env:
                os.environ[key] = env[key]
            else:
                del os.environ[key]
    if os.getcwd() != cwd:
        leaked.append(f"the working directory ({os.getcwd()})")
        os.chdir(cwd)
    if torch.get_num_threads() != threads:
        leaked.append(f"torch's thread count ({torch.get_num_threads()}, was {threads})")
        torch.set_num_threads(threads)
    if _torch_modes() != modes:
        leaked.append(f"torch's modes (grad, dtype, deterministic: {_torch_modes()}, were {modes})")
        _set_torch_modes(modes)
    if leaked:
        pytest.fail("the test leaked " + "; ".join(leaked) + " (restored)", pytrace=False)


@pytest.fixture(autouse=True, scope="session")
def _data_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Prepared corpora go to a directory of the session, not the user's cache; so
    do Hugging Face's caches (the exports' modelling files that transformers copies
    when it loads them with trust_remote_code, the datasets the import tests save)."""
    os.environ["NMT_CACHE_DIR"] = str(tmp_path_factory.mktemp("nmt-cache"))
    os.environ["HF_HOME"] = str(tmp_path_factory.mktemp("hf-home"))


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


def skip_or_fail(message: str) -> None:
    """Skip for want of something optional (data, a package, a program), or fail under
    CI's NMT_REQUIRE_DATA=1, where .ci/run and ``make test`` provide every one of them."""
    if flag("NMT_REQUIRE_DATA"):
        pytest.fail(message + " (NMT_REQUIRE_DATA=1 forbids skipping)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def multi30k() -> Path:
    """../shared/data/multi30k; skips without it, fails in CI (NMT_REQUIRE_DATA=1)."""
    if not (SHARED_MULTI30K / "train.de.gz").is_file():
        message = f"Multi30k not found at {SHARED_MULTI30K}"
        skip_or_fail(message)
    return SHARED_MULTI30K


def require_extra(module: str, extra: str):
    """Import an optional extra's module; without it skip, or fail under CI's
    NMT_REQUIRE_DATA=1 (``make test`` installs every extra)."""
    try:
        return __import__(module)
    except ImportError:
        message = f"{module} not installed ({install_hint(extra)})"
        skip_or_fail(message)


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


def as_in_a_terminal() -> None:
    """``preexec_fn`` for a child that a test sends SIGINT: Ctrl-C's default action,
    whatever this process inherited (started in the background from a script, the
    suite runs with SIGINT ignored, and so would the child)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def as_in_the_background() -> None:
    """``preexec_fn`` for a child started as ``cmd &`` from a script starts: SIGINT
    ignored."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def training_until_logged(
    toy_dir: Path, run: Path, *options: str, env: dict[str, str] | None = None, **popen: Any
) -> subprocess.Popen:
    """``nmt train`` of an endless tiny recipe in a subprocess (``options`` added to
    its command line, ``popen`` to Popen), returned once it has logged a step."""
    recipe = write_subprocess_recipe(
        toy_dir, run, max_steps=100_000, valid_every=100_000, log_every=1
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "nmt", "train", str(recipe), "--device", "cpu", *options],
        env=env or subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **popen,
    )
    deadline = time.time() + 120
    while not (run / "metrics.jsonl").is_file() and time.time() < deadline:
        time.sleep(0.2)
    return proc


def subprocess_env() -> dict[str, str]:
    """The environment for ``python -m nmt`` subprocesses: this checkout importable, and
    Python's fault handler on, so that a process that aborts (SIGABRT, SIGSEGV) prints
    where each of its threads was into the output a failing test shows."""
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root, "PYTHONFAULTHANDLER": "1"}
    env.pop("WORLD_SIZE", None)
    return env


def allocator_of_a_command(env: dict[str, str]) -> str:
    """The allocator an ``nmt`` command started in ``env`` runs under (and the processes
    it starts): TCMalloc where nmt preloads it, else the one LD_PRELOAD names, else the
    system's (nmt/setup/allocator.py)."""
    if restart_environment(env, sys.platform, library_dirs()) is not None:
        return "tcmalloc"
    return allocator_named(env.get("LD_PRELOAD", ""))


def run_outside_the_checkout(
    code: str, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``python -c CODE ARGS`` with nothing of this checkout on the path, as an export's
    user runs it (the export tests also make nmt itself unimportable in CODE); a
    PYTHONPATH in ``env`` (other packages than the venv's) is kept."""
    environment = {**subprocess_env(), **(env or {})}
    if "PYTHONPATH" not in (env or {}):
        environment.pop("PYTHONPATH")
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
    )


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


def slow_tests(tests: list[pytest.Item]) -> int:
    return sum(1 for item in tests if item.get_closest_marker("slow"))


def worker_blocks(items: list[pytest.Item], workers: int) -> list[list[pytest.Item]]:
    """``items`` in ``workers`` blocks, one per xdist worker. The modules with slow
    tests come first, each whole (its module fixtures built once), dealt in the
    order given to the block with the fewest slow tests; the other modules' tests
    then fill each block to the share that xdist's ``worksteal`` hands its worker
    (of the n tests left, n // the workers left)."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    blocks: list[list[pytest.Item]] = [[] for _ in range(workers)]
    quick: list[pytest.Item] = []
    for tests in modules.values():
        if slow_tests(tests):
            min(blocks, key=slow_tests).extend(tests)
        else:
            quick += tests
    left = len(items)
    for k, block in enumerate(blocks):
        take = max(0, left // (workers - k) - len(block)) if k < workers - 1 else len(quick)
        block += quick[:take]
        del quick[:take]
        left -= len(block)
    return blocks


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under N xdist workers, the tests in :func:`worker_blocks`' order (from
    pytest-randomly's, which ran before this hook). xdist's ``worksteal`` (addopts)
    hands each worker its block and lets an idle worker take tests from the end of
    another's queue: every worker runs its slow tests first, and quick ones even out
    the end. In random order under xdist's ``load`` a long test could start last on
    one worker while the other had run out of tests (docs/benchmarks.md, session 50)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        items[:] = [item for block in worker_blocks(items, workers) for item in block]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say which order the tests ran in (pytest-randomly's seed), also under -q, so
    that a failure that depends on the order can be replayed."""
    seed = getattr(terminalreporter.config.option, "randomly_seed", None)
    if isinstance(seed, int):
        terminalreporter.write_line(
            f"test order: pytest-randomly seed {seed} (replay: pytest --randomly-seed={seed})"
        )
