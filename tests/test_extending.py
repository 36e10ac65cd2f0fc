"""docs/extending.md's Python example runs as shown, from a directory laid out as
the repository (recipes/ and data/ beside it)."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


@pytest.mark.slow
def test_the_training_snippet_runs_as_shown(tmp_path, monkeypatch, capsys):
    """Run here, as a reader pastes it into Python at a clone's root."""
    (block,) = [
        b for b in python_blocks((ROOT / "docs/extending.md").read_text()) if "load_recipe(" in b
    ]
    for name in ("recipes", "data"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "docs/extending.md", "exec"), {"__name__": "__main__"})
    steps = re.search(r'"train\.max_steps=(\d+)"', block)[1]  # the updates it asks for
    assert capsys.readouterr().out.strip().splitlines()[-1] == steps
    assert (tmp_path / "runs/scratch/last.pt").is_file()


def test_the_unregister_snippet_lets_a_plug_ins_cell_run_again(monkeypatch):
    """A notebook's cell that defines the plug-in runs twice: the second time, after
    the docs' block, it registers again instead of being refused."""
    text = (ROOT / "docs/extending.md").read_text()
    (block,) = [b for b in python_blocks(text) if "unregister" in b]
    cell = compile((ROOT / "tests/plugins/uniform_attention.py").read_text(), "cell", "exec")
    notebook = types.ModuleType("notebook")  # a kernel's __main__
    monkeypatch.setitem(sys.modules, "notebook", notebook)
    exec(cell, notebook.__dict__)
    with pytest.raises(ValueError, match="registered twice"):
        exec(cell, notebook.__dict__)
    exec(compile(block, "docs/extending.md", "exec"), notebook.__dict__)
    exec(cell, notebook.__dict__)

    from nmt.setup.attention import ATTENTION

    assert ATTENTION.get("uniform") is notebook.UniformAttention
