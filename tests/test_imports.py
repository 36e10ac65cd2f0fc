"""Every ``nmt`` module imports on its own, and no module imports itself through
others: the runtime import graph (imports under ``if TYPE_CHECKING`` are for
annotations only) has no cycle."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import subprocess_env

PACKAGE = Path(__file__).resolve().parents[1] / "nmt"


def module_names() -> dict[str, Path]:
    names = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def runtime_imports(tree: ast.AST) -> list[str]:
    """Dotted names imported anywhere in the module (functions included), leaving
    out ``if TYPE_CHECKING:`` blocks."""
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            node.body = [ast.Pass()]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the nmt modules importing it runs, its enclosing packages included
    (importing ``nmt.a.b`` runs ``nmt.a``), its own packages left out."""
    modules = module_names()
    graph = {}
    for name, path in modules.items():
        edges = set()
        for target in runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                if prefix in modules and prefix != name and not name.startswith(prefix + "."):
                    edges.add(prefix)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_import_graph_has_no_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.slow  # a fresh interpreter's import of every module, in two processes
def test_every_module_imports_on_its_own():
    """Each module in turn, with every nmt module forgotten before it (torch stays
    loaded, to keep this fast), the modules shared between two processes."""
    names = sorted(set(module_names()) - {"nmt.__main__"})

    def probe(share: list[str]) -> subprocess.Popen:
        code = (
            "import importlib, sys\n"
            f"for name in {share!r}:\n"
            "    for loaded in [m for m in sys.modules if m == 'nmt' or m.startswith('nmt.')]:\n"
            "        del sys.modules[loaded]\n"
            "    importlib.import_module(name)\n"
        )
        return subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)

    for process in [probe(names[0::2]), probe(names[1::2])]:
        _, stderr = process.communicate()
        assert process.returncode == 0, stderr


def test_a_training_config_does_not_load_the_trainer():
    """A recipe section is cheap to build: no trainer, DDP or sacreBLEU behind it."""
    probe = (
        "import json, sys\n"
        "from nmt.setup.training import TrainConfig\n"
        "TrainConfig(max_steps=1)\n"
        "names = [m for m in sys.modules if m.startswith(('nmt', 'torch', 'sacrebleu'))]\n"
        "print(json.dumps(sorted(names)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    loaded = json.loads(done.stdout)
    assert loaded == [
        "nmt",
        "nmt.errors",
        "nmt.setup",
        "nmt.setup.config",
        "nmt.setup.registry",
        "nmt.setup.training",
    ]


def test_a_registry_loads_its_built_in_entries_at_the_first_lookup():
    """A config module names its registry without importing the modules that fill
    it; reading a recipe section that names an entry imports them then."""
    probe = (
        "import sys\n"
        "from nmt.setup.config import from_dict\n"
        "from nmt.setup.training import TrainConfig\n"
        "assert 'nmt.training.scheduled_sampling' not in sys.modules\n"
        "data = {'max_steps': 1, 'trainer': {'kind': 'scheduled_sampling'}}\n"
        "cfg = from_dict(TrainConfig, data)\n"
        "print(type(cfg.trainer).__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip() == "ScheduledSamplingConfig", done.stderr


@pytest.mark.parametrize("recipe", ["recipes/toy.yaml", "recipes/multi30k-de-en.yaml"])
def test_reading_and_checking_a_recipe_loads_no_torch(recipe):
    """Every config class lives in a torch-free module and the registries import a
    variant's code only when a model is built: a recipe naming every kind of plug-in
    point (attention, trainer, encoder block, decoder) loads no torch."""
    root = Path(__file__).resolve().parents[1]
    overrides = [
        "model.attention.kind=local_p",
        "train.trainer.kind=scheduled_sampling",
        "model.encoder.block=qanet",
        "model.decoder.kind=two_stream",
    ]
    probe = (
        "import json, sys\n"
        "import nmt.setup.recipe\n"
        f"cfg = nmt.setup.recipe.load_recipe({recipe!r}, {overrides!r})\n"
        "assert type(cfg.model.attention).__name__ == 'LocalPConfig'\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'torch')))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_no_module_imports_what_only_posix_has():
    """File locks go through portalocker (flock on POSIX, the Windows equivalent
    there) and peak memory reads ``resource`` only when asked: no module of nmt
    imports ``fcntl`` or ``resource`` when it is imported."""
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[1] / "nmt"
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:  # module level only: a function may import on demand
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not {"fcntl", "resource"} & set(names), f"{path.name}: {names}"


def loaded_after(argv: list[str], names: str) -> str:
    """Run ``nmt *argv`` in a fresh interpreter and return what ``names`` (an
    expression over ``sys.modules``) was when it exited."""
    code = (
        "import atexit, runpy, sys\n"
        f"atexit.register(lambda: print('LOADED', {names}))\n"
        f"sys.argv = ['nmt', *{argv!r}]\n"
        "runpy.run_module('nmt', run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.slow  # a subprocess that trains: a second or more
def test_training_loads_no_plotting_or_study_module(tiny_recipe):
    """``nmt train`` imports what training needs: no matplotlib, nothing of attention
    inspection or of a study (nmt compare, its launchers): a cluster job starts
    faster, and a broken plotting install cannot stop a run."""
    recipe = tiny_recipe(train={"max_steps": 2, "valid_every": 2})
    heavy = "sorted(m for m in sys.modules if m.startswith(('matplotlib', 'nmt.inspection',"
    heavy += " 'nmt.compare', 'nmt.launch')))"
    assert loaded_after(["train", str(recipe), "--device", "cpu"], heavy) == "LOADED []"


@pytest.mark.slow
def test_translating_loads_no_torchdynamo(tiny_run, toy_dir):
    """``nmt translate`` builds a model and searches without TorchDynamo, whose import
    is much of the start of a command that does not train (training loads it anyway:
    PyTorch's optimisers do)."""
    argv = ["translate", str(tiny_run), "--device", "cpu", "-i", str(toy_dir / "test.src")]
    assert loaded_after(argv, "'torch._dynamo' in sys.modules") == "LOADED False"


def test_a_typo_in_a_recipe_is_refused_before_torch_loads(tmp_path):
    """`nmt train` reads and checks the recipe first: a misspelt key is one line, and
    neither torch nor the trainer was imported for it (seconds on a loaded machine)."""
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from nmt.cli import app\n"
        "r = CliRunner().invoke(app, ['train', 'recipes/toy.yaml', '--set', 'train.lrr=1'])\n"
        "print(r.exit_code, 'torch' in sys.modules, 'nmt.training.trainer' in sys.modules)\n"
        "print(r.output)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(),
        cwd=PACKAGE.parent, timeout=120,
    )  # fmt: skip
    status, output = done.stdout.split("\n", 1)
    assert status == "2 False False", done.stdout + done.stderr
    assert "train.lrr: unknown key (did you mean 'train.lr'?)" in output
