"""report.html in a real headless browser (Debian's chromium, which .ci/run installs):
the page renders, its script runs without a console error, its tables sort, and a
screenshot is not blank."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.compare.html import write_html
from tests.compare.test_compare import write_spec
from tests.conftest import skip_or_fail

runner = CliRunner()
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--allow-file-access-from-files",
]


@pytest.fixture(scope="module")
def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        message = "no chromium here (.ci/run installs Debian's)"
        skip_or_fail(message)
    return path


def browse(
    chromium: str, page, tmp_path, *action: str, hash: str = ""
) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(action)}-{len(hash)}"
    command = [chromium, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr"]
    command += ["--v=0", "--virtual-time-budget=5000", "--window-size=1400,1800", *action]
    return subprocess.run(
        [*command, page.as_uri() + hash], capture_output=True, text=True, timeout=120
    )


@pytest.mark.slow
def test_the_study_page_renders_runs_and_sorts_in_a_browser(chromium, tmp_path, toy_dir):
    spec = write_spec(
        tmp_path,
        toy_dir,
        {"global": [], "local_m": ["model.attention.kind=local_m", "model.attention.window=2"]},
        seeds=(1, 2),
        figures=True,
    )
    data = yaml.safe_load(spec.read_text())
    data["splits"] = ["test", "test*3"]
    data["heatmaps"] = [0]
    spec.write_text(yaml.safe_dump(data))
    result = runner.invoke(app, ["compare", str(spec), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    page = tmp_path / "study" / "report.html"
    text = page.read_text(encoding="utf-8")
    assert "<script src=" not in text and "http" not in text.split("<script")[1]  # no network
    embedded = json.loads(text.split('type="application/json">')[1].split("</script>")[0])
    joined = next(s for s in embedded["splits"] if s["name"] == "test*3")
    (line,) = joined["maps"].values()
    assert set(line) == {"global", "local_m"} and len(line["global"]["captions"]) == 2
    assert line["local_m"]["centers"] is not None and line["global"]["centers"] is None
    # the study's plots travel inside the page, byte for byte
    assert [p["name"] for p in joined["plots"]] == ["bleu_by_length_test*3.png"]
    (curves,) = embedded["plots"]
    png = base64.b64decode(curves["src"].removeprefix("data:image/png;base64,"))
    assert png == (tmp_path / "study" / "dev_curves.png").read_bytes()
    # the joined line's attention grid, a panel per variant, is a figure beside the page
    assert (tmp_path / "study" / "attention_test*3_line0.png").read_bytes()[:4] == b"\x89PNG"

    dom = browse(chromium, page, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-ready="1"' in dom.stdout  # the script ran to its end
    assert dom.stdout.count("<canvas") == 4  # line 0 of test and of test*3, per variant
    assert dom.stdout.count('class="plot"') == 3  # BLEU by length per split, dev curves
    errors = [x for x in dom.stderr.splitlines() if "CONSOLE" in x or "Uncaught" in x]
    assert not errors, errors

    rows = {r["variant"]: r["bleu"] for r in embedded["splits"][0]["rows"]}
    for column in ("bleu", "variant"):
        dom = browse(chromium, page, tmp_path, "--dump-dom", hash=f"#sort={column}")
        first = dom.stdout.split('class="variants"')[1].split("</table>")[0]
        order = [v for v in sorted(rows) if f"<td>{v}</td>" in first]
        shown = sorted(order, key=lambda v: first.index(f"<td>{v}</td>"))
        want = sorted(rows, key=(lambda v: rows[v]) if column == "bleu" else None)
        assert shown == want, (column, shown)

    shot = tmp_path / "shot.png"
    done = browse(chromium, page, tmp_path, f"--screenshot={shot}")
    assert done.returncode == 0 and shot.is_file(), done.stderr[-2000:]
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)
    colours = np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)
    assert pixels.shape[0] > 100 and len(colours) > 20  # text, tables and heatmaps drawn


@pytest.mark.slow
def test_text_that_looks_like_markup_is_shown_as_text_and_the_page_still_runs(chromium, tmp_path):
    """A test sentence holding "<!--<script>" (or "</script>") is data: it must not
    end the embedded JSON's script element nor swallow the page's own script."""
    hostile = ["<!--<script>", "</script>", "a&b", "x>y"]
    figure = {"src": hostile, "tgt": ["ok"], "weights": [[0.25] * 4], "centers": None}
    page = tmp_path / "report.html"
    maps = {"test": {0: {"global": figure | {"captions": [0]}}}}
    write_html(page, "markup <!--<script>", ("test",), [], maps, ["a note: <!--<script>"])
    text = page.read_text(encoding="utf-8")
    script = text.split('type="application/json">')[1].split("</script>")[0]
    assert (
        "<" not in script
        and json.loads(script)["splits"][0]["maps"]["0"]["global"]["src"] == hostile
    )
    dom = browse(chromium, page, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-ready="1"' in dom.stdout  # the page's script ran to its end
    errors = [x for x in dom.stderr.splitlines() if "CONSOLE" in x or "Uncaught" in x]
    assert not errors, errors
