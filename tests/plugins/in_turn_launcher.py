"""A user's launcher, written outside the nmt package: a study's runs one after
another in this process, each named in OUT/launched.txt as it starts (where a
cluster's launcher would submit a job).

tests/compare/test_launchers.py imports it as a plug-in and runs a study with
``launcher: {kind: in_turn}``."""

from __future__ import annotations

from pathlib import Path

from nmt.compare.runs import Launcher, RunResult, bring_up
from nmt.compare.spec import LAUNCHERS, LauncherSpec, PlannedRun


class InTurn(Launcher):
    def launch(
        self,
        planned: list[PlannedRun],
        splits: tuple[str, ...],
        device: str,
        spec: LauncherSpec,
        out: Path,
        wait: bool,
        jobs: int,
    ) -> list[RunResult]:
        outcomes = []
        for run in planned:
            with open(out / "launched.txt", "a", encoding="utf-8") as f:
                f.write(f"{run.variant} {run.seed}\n")
            outcomes.append(bring_up(run, splits, device))
        return outcomes


LAUNCHERS.register("in_turn", target=f"{__name__}:InTurn")
