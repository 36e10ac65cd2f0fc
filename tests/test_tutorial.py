"""docs/tutorial.ipynb runs as it stands (nbclient, a real Jupyter kernel): it trains
the toy recipe, compares two variants, draws attention and exports from Python, so
that it cannot rot."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.conftest import require_extra

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_tutorial_notebook_runs_from_start_to_end(tmp_path):
    nbformat = require_extra("nbformat", "test")
    require_extra("nbclient", "test")
    require_extra("transformers", "hf")
    from nbclient import NotebookClient

    for name in ("recipes", "data"):  # the notebook runs from a clone's root
        (tmp_path / name).symlink_to(ROOT / name)
    notebook = nbformat.read(ROOT / "docs" / "tutorial.ipynb", as_version=4)
    client = NotebookClient(notebook, timeout=600, resources={"metadata": {"path": str(tmp_path)}})
    # nbclient hands SIGINT and SIGTERM to its event loop, whose removal sets them to
    # Python's defaults, not to what this process had (an ignored SIGINT, in a
    # background job): put back what was there
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        client.execute()
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    shown = "".join(
        str(o.get("data", {}).get("text/plain", "")) + o.get("text", "") for o in outputs
    )
    assert "'local_m'" in shown and "(60, 'train.max_steps'" in shown
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the attention figure
    assert (tmp_path / "runs/tutorial/global-hf/config.json").is_file()
    assert (tmp_path / "runs/tutorial/study/report.md").is_file()
