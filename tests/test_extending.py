"""docs/extending.md's Python example runs as shown, from a directory laid out as
the repository (recipes/ and data/ beside it)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import subprocess_env

ROOT = Path(__file__).resolve().parents[1]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


@pytest.mark.slow
def test_the_training_snippet_runs_as_shown(tmp_path):
    (block,) = [
        b for b in python_blocks((ROOT / "docs/extending.md").read_text()) if "load_recipe(" in b
    ]
    for name in ("recipes", "data"):
        (tmp_path / name).symlink_to(ROOT / name)
    done = subprocess.run(
        [sys.executable, "-c", block],
        cwd=tmp_path,
        env={**subprocess_env(), "NMT_QUIET": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    steps = re.search(r'"train\.max_steps=(\d+)"', block)[1]  # the updates it asks for
    assert done.stdout.strip().splitlines()[-1] == steps
    assert (tmp_path / "runs/scratch/last.pt").is_file()
