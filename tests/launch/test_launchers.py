"""Where a study's runs train is a registry (nmt.setup.compare.LAUNCHERS): the local
and SLURM launchers are two entries, and a user's launcher is one class and one
registration line (tests/plugins/in_turn_launcher.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from nmt.compare.study import run_study
from nmt.decoding.evaluate import evaluate
from nmt.errors import NmtError
from nmt.launch.pool import share
from nmt.launch.runs import RunResult, done
from nmt.setup.compare import LAUNCHERS, load_spec
from nmt.setup.decoding import decoding
from nmt.setup.plugins import import_plugins
from tests.compare.test_compare import write_spec

PLUGIN = Path(__file__).parents[1] / "plugins" / "in_turn_launcher.py"


def test_the_built_in_launchers_are_registered_and_an_unknown_one_is_named(tmp_path, toy_dir):
    assert {"local", "slurm"} <= set(LAUNCHERS.names())
    spec = write_spec(tmp_path, toy_dir, {"global": []}, seeds=(1,))
    with pytest.raises(
        NmtError, match=r"launcher\.kind: unknown launcher 'slrum' \(did you mean 'slurm'"
    ):
        load_spec(spec, ["launcher.kind=slrum"])


@pytest.mark.slow  # trains a study: a second or more
def test_a_launcher_from_a_plug_in_brings_up_the_study(tmp_path, toy_dir):
    import_plugins([str(PLUGIN)])
    spec = write_spec(
        tmp_path, toy_dir, {"global": [], "local_m": ["model.attention.kind=local_m"]}, seeds=(1,)
    )
    raw = yaml.safe_load(spec.read_text())
    raw["launcher"] = {"kind": "in_turn"}
    raw["plugins"] = [str(PLUGIN)]
    spec.write_text(yaml.safe_dump(raw))
    out = run_study(spec, device="cpu")
    assert (out / "launched.txt").read_text().splitlines() == ["global 1", "local_m 1"]
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert {r["variant"] for r in rows} == {"global", "local_m"}
    with pytest.raises(NmtError, match="--no-wait: the in_turn launcher trains the runs here"):
        run_study(spec, device="cpu", wait=False)


@pytest.mark.parametrize(
    ("threads", "jobs", "runs", "expected"),
    [
        (2, 2, 6, (2, 1)),
        (2, 2, 1, (1, 2)),
        (16, 4, 2, (2, 8)),
        (2, 4, 0, (1, 2)),
        (1, 2, 2, (2, 1)),
    ],
)
def test_runs_at_once_are_never_more_than_the_runs_left(threads, jobs, runs, expected):
    """``--jobs 2`` with one run left (a resumed study) trains it on every thread, not
    on half of them; a share is at least one thread."""
    assert share(threads, jobs, runs) == expected


@pytest.mark.slow  # translates the toy test set
def test_a_run_with_a_decoding_left_is_not_done(tiny_run, tmp_path):
    """A trained and tested run still has work to launch while one of the study's
    decodings lacks its results: ``--jobs 2`` on a study that only adds decodings to
    finished runs decodes two at a time (it counted them done: one at a time)."""
    run = shutil.copytree(tiny_run, tmp_path / "run")
    finished = RunResult("global", 1, run, "reused")
    greedy = (("greedy", ("decode.beam=1",)),)
    assert not done(finished, ("test",))  # trained, not tested
    evaluate(run, ["test"], "cpu")
    assert done(finished, ("test",))
    assert not done(finished, ("test",), greedy)
    evaluate(run, ["test"], "cpu", *decoding(greedy[0][1]))
    assert done(finished, ("test",), greedy)
    assert not done(finished, ("test", "test*2"), greedy)  # a split still to test
