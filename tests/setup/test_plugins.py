"""A plug-in outside the package (``--plugin``, a recipe's or spec's ``plugins:``)
registers an attention kind that trains, resumes, translates and compares like a
built-in; its name is stored with the run, and a missing one is one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import Result

from nmt.setup import plugins
from nmt.setup.recipe import load_recipe
from tests.conftest import (
    _forget_plugins,
    _plugins_known,
    allocator_of_a_command,
    require_extra,
    subprocess_env,
    tiny_recipe_dict,
)
from tests.test_cli import invoke

PLUGIN = Path(__file__).parents[1] / "plugins" / "uniform_attention.py"


def nmt(*args, extra_env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``nmt ARGS`` in a process of its own (for what the process is: DDP ranks, a
    spawned study worker)."""
    env = {**subprocess_env(), **(extra_env or {})}
    return subprocess.run(
        [sys.executable, "-m", "nmt", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        **kwargs,
    )


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    """The plug-in in a directory of its own, outside the package."""
    out = tmp_path / "elsewhere"
    out.mkdir()
    shutil.copy(PLUGIN, out / "uniform_attention.py")
    return out


@pytest.fixture
def nmt_here(monkeypatch):
    """``nmt ARGS`` in this process as in a fresh one: the plug-ins that the test's
    earlier commands imported are forgotten first (tests/conftest.py's guard forgets
    them after every test), and ``plugin_dir``, if given, is on the path for this
    command alone (as PYTHONPATH is for a process)."""
    known = _plugins_known()

    def command(*args, plugin_dir: Path | None = None, input: str | None = None) -> Result:
        _forget_plugins(known)
        with monkeypatch.context() as patch:
            if plugin_dir is not None:
                patch.syspath_prepend(str(plugin_dir))
            return invoke(*args, input=input)

    return command


@pytest.mark.slow  # trains: a second or more
def test_a_plugin_module_trains_translates_and_is_named_where_it_is_missing(
    plugin_dir, toy_dir, tmp_path, nmt_here
):
    """A module on the path named by --plugin: the run stores it, translate imports
    it again, and without it translate says which plug-in the run needs (resuming and
    comparing with a plug-in: the file-path tests below, through the same import)."""
    run = tmp_path / "run"
    recipe = tmp_path / "recipe.yaml"
    base = tiny_recipe_dict(toy_dir, run, train={"max_steps": 4, "valid_every": 2})
    recipe.write_text(yaml.safe_dump(base))
    uniform = ["--plugin", "uniform_attention", "--set", "model.attention.kind=uniform"]

    done = nmt_here("train", recipe, *uniform, "--device", "cpu", plugin_dir=plugin_dir)
    assert done.exit_code == 0, done.output[-3000:]
    stored = yaml.safe_load((run / "recipe.yaml").read_text())
    assert stored["plugins"] == ["uniform_attention"]
    assert stored["model"]["attention"]["kind"] == "uniform"

    source = (toy_dir / "test.src").read_text()
    done = nmt_here("translate", run, "--device", "cpu", plugin_dir=plugin_dir, input=source)
    assert done.exit_code == 0 and len(done.stdout.splitlines()) == 15, done.output[-3000:]

    missing = nmt_here("translate", run, "--device", "cpu", input=source)
    lines = missing.stderr.strip().splitlines()
    assert missing.exit_code == 2 and len(lines) == 1, missing.stderr
    assert "plug-in 'uniform_attention'" in lines[0] and "is not installed" in lines[0]
    assert f"({run} was trained with it)" in lines[0] and missing.stdout == ""


def refused_here(nmt_here, *args) -> list[str]:
    """The output lines of ``nmt ARGS``, a refusal in this process."""
    result = nmt_here(*args)
    assert result.exit_code == 2, result.output
    return result.output.strip().splitlines()


def test_a_plugin_that_fails_to_import_is_one_line(plugin_dir, toy_dir, tmp_path, nmt_here):
    """A plug-in that fails to import is one line naming it and where it failed (a
    ``.py`` path that imports: test_a_plugin_file_reaches_every_process_a_run_starts)."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe_dict(toy_dir, tmp_path / "run")))
    broken = plugin_dir / "broken.py"
    broken.write_text("import torch\nraise RuntimeError('the lab server is down')\n")
    lines = refused_here(nmt_here, "train", recipe, "--plugin", broken, "--device", "cpu")
    assert len(lines) == 1 and "broken.py:2: RuntimeError: the lab server is down" in lines[0]
    assert not (tmp_path / "run").exists()


def test_without_the_plugin_the_kind_is_unknown_and_named(tiny_recipe, nmt_here):
    recipe = tiny_recipe(model={"attention": {"kind": "uniform"}})
    lines = refused_here(nmt_here, "train", recipe, "--device", "cpu")
    assert "unknown attention kind 'uniform'" in lines[-1]


def test_two_plugin_files_of_one_name_are_two_modules(tmp_path):
    """lab/a/attn.py and lab/b/attn.py: the second must not replace the first."""
    files = []
    for lab in ("a", "b"):
        (tmp_path / lab).mkdir()
        files.append(tmp_path / lab / "attn.py")
        files[-1].write_text(f"WHICH = {lab!r}\n")
    before = set(sys.modules)
    plugins.import_plugins(map(str, files))
    added = {name: sys.modules[name] for name in set(sys.modules) - before}
    assert sorted(m.WHICH for m in added.values()) == ["a", "b"]
    assert all(name.startswith("nmt_plugin_attn_") for name in added)


@pytest.mark.slow
def test_a_plugin_file_reaches_every_process_a_run_starts(
    plugin_dir, toy_dir, tmp_path, nmt_here, monkeypatch
):
    """Named by a relative path: stored resolved, so that translate works from another
    directory; --nproc 2 (DDP ranks, with the base-class projections the plug-in leaves
    unused) and a study with --jobs 2 (a spawned worker) train with it, under the
    allocator the command chose (nmt/setup/allocator.py: they inherit its preload)."""
    recipe = tmp_path / "recipe.yaml"
    base = tiny_recipe_dict(toy_dir, tmp_path / "run", train={"max_steps": 2, "valid_every": 2})
    base["model"]["attention"] = {"kind": "uniform"}
    recipe.write_text(yaml.safe_dump(base))
    relative = ["--plugin", "elsewhere/uniform_attention.py"]
    chosen = allocator_of_a_command(subprocess_env())
    ddp, env = ["--nproc", "2", *relative, "--device", "cpu"], {"OMP_NUM_THREADS": "1"}
    done = nmt("train", recipe, *ddp, cwd=tmp_path, extra_env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    stored = yaml.safe_load((tmp_path / "run" / "recipe.yaml").read_text())["plugins"]
    assert stored == [str((plugin_dir / "uniform_attention.py").resolve())]
    assert where(tmp_path / "run")["allocator"] == chosen
    source = (toy_dir / "test.src").read_text()
    with monkeypatch.context() as patch:
        patch.chdir(toy_dir)  # another directory
        done = nmt_here("translate", tmp_path / "run", input=source)
    assert done.exit_code == 0 and len(done.stdout.splitlines()) == 15, done.output[-3000:]

    spec = tmp_path / "spec.yaml"
    study = {
        "base": str(recipe),
        "out_dir": str(tmp_path / "study"),
        "plugins": ["elsewhere/uniform_attention.py", str(plugin_dir / "uniform_attention.py")],
        "variants": {"uniform": []},  # one run: one spawned worker
        "bootstrap": 100,
        "heatmaps": [],
        "figures": False,
    }
    spec.write_text(yaml.safe_dump(study))
    done = nmt("compare", spec, "--jobs", "2", "--device", "cpu", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]  # two spellings of one file: one module
    assert where(tmp_path / "study/runs/uniform/seed1")["allocator"] == chosen


def where(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())["where"]


def test_an_installed_plugins_kind_is_known_when_a_recipe_is_read(
    plugin_dir, tiny_recipe, monkeypatch
):
    """An entry point of the group nmt.plugins, in a package installed on the path:
    reading a recipe that names its kind loads it (no --plugin)."""
    info = plugin_dir / "lab_plugins-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lab-plugins\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[nmt.plugins]\nuniform = uniform_attention\n")
    recipe = tiny_recipe(model={"attention": {"kind": "uniform"}})
    plugins._loaded.discard(plugins.GROUP)  # as a process that has not looked for them yet
    monkeypatch.syspath_prepend(str(plugin_dir))
    assert repr(load_recipe(recipe).model.attention) == "UniformConfig(kind='uniform')"


def test_a_plugin_that_exits_at_import_is_one_line(plugin_dir, tiny_recipe, nmt_here):
    quitter = plugin_dir / "quitter.py"
    quitter.write_text("import sys\nsys.exit(0)\n")
    args = ["train", tiny_recipe(), "--plugin", quitter, "--device", "cpu"]
    lines = refused_here(nmt_here, *args)
    assert len(lines) == 1 and "called sys.exit(0) while it was imported" in lines[0]


def test_the_example_command_of_extending_md_is_a_valid_recipe(plugin_dir, monkeypatch):
    """docs/extending.md's command line, read as nmt train reads it."""
    text = (Path(__file__).parents[2] / "docs" / "extending.md").read_text()
    assert "--set 'model.attention={kind: uniform}'" in text
    monkeypatch.syspath_prepend(str(plugin_dir))
    toy = Path(__file__).parents[2] / "recipes" / "toy.yaml"
    cfg = load_recipe(toy, ["model.attention={kind: uniform}"], plugins=("uniform_attention",))
    assert cfg.model.attention.kind == "uniform"


@pytest.mark.slow
def test_a_run_moved_with_its_plugin_file_resumes_and_translates_where_it_is(
    plugin_dir, toy_dir, tmp_path, nmt_here
):
    """The stored plug-in path is the training machine's: after a move it is gone
    (one line that says to name the file with --plugin), or it is still there beside
    the copy (which must not register the kind twice); --plugin stands in for it."""
    run, recipe = tmp_path / "run", tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe_dict(toy_dir, run, train={"max_steps": 2})))
    original = plugin_dir / "uniform_attention.py"
    uniform = ["--plugin", original, "--set", "model.attention.kind=uniform"]
    done = nmt_here("train", recipe, *uniform, "--device", "cpu")
    assert done.exit_code == 0, done.output[-3000:]
    moved = tmp_path / "moved"
    shutil.copytree(run, moved / "run")
    shutil.copy(original, moved / "uniform_attention.py")
    copy = moved / "uniform_attention.py"
    source = (toy_dir / "test.src").read_text()
    resume = ["train", moved / "run/recipe.yaml", "--set", f"run_dir={moved / 'run'}"]
    resume += ["--set", "train.max_steps=4", "--resume", "--device", "cpu"]

    both = nmt_here(*resume, "--plugin", copy)  # the original still there
    assert both.exit_code == 0, both.output[-3000:]
    assert yaml.safe_load((moved / "run/recipe.yaml").read_text())["plugins"] == [str(copy)]

    shutil.rmtree(plugin_dir)  # the original gone
    (moved / "run/last.pt").unlink()
    shutil.copy(run / "last.pt", moved / "run/last.pt")
    missing = nmt_here(*resume)
    assert missing.exit_code == 2 and len(missing.stderr.strip().splitlines()) == 1
    assert "no such file (a run moved with its plug-in: name the file" in missing.stderr
    done = nmt_here(*resume, "--plugin", copy)
    assert done.exit_code == 0, done.output[-3000:]
    out = nmt_here("translate", run, "--plugin", copy, "--device", "cpu", input=source)
    assert out.exit_code == 0 and len(out.stdout.splitlines()) == 15, out.output[-3000:]


@pytest.mark.slow
def test_an_export_needs_no_plugin_file_and_records_no_path_of_this_machine(
    plugin_dir, toy_dir, tmp_path, nmt_here
):
    """A plug-in's kind is not exported (the export would import the training
    machine's file when loaded); what an export writes names no path of it."""
    require_extra("transformers", "hf")
    run, recipe = tmp_path / "run", tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe_dict(toy_dir, run, train={"max_steps": 2})))
    uniform = ["--plugin", plugin_dir / "uniform_attention.py"]
    done = nmt_here("train", recipe, *uniform, "--set", "model.attention.kind=uniform", "--set",
                    "data.test=[]", "--device", "cpu")  # fmt: skip
    assert done.exit_code == 0, done.output[-3000:]
    refused = nmt_here("export", run, "-o", tmp_path / "hf", "--format", "hf")
    assert refused.exit_code == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "model.attention.kind uniform (module nmt_plugin_uniform_attention_" in refused.stderr
    assert "not exported" in refused.stderr and not (tmp_path / "hf").exists()

    local = tmp_path / "local"  # a built-in kind that needs the modelling file
    sets = ["--set", "model.attention.kind=local_m", "--set", f"run_dir={local}"]
    done = nmt_here("train", recipe, *uniform, *sets, "--set", "data.test=[]", "--device", "cpu")
    assert done.exit_code == 0, done.output[-3000:]
    done = nmt_here("export", local, "-o", tmp_path / "hf", "--format", "hf")
    assert done.exit_code == 0, done.output[-3000:]
    for written in (tmp_path / "hf").iterdir():
        if written.suffix in (".json", ".md", ".py"):
            text = written.read_text(encoding="utf-8")
            assert str(tmp_path) not in text and "uniform_attention" not in text, written.name
