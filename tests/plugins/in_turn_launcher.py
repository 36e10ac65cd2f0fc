"""A user's launcher, written outside the nmt package: a study's runs one after
another in this process, each named in OUT/launched.txt as it starts (where a
cluster's launcher would submit a job).

tests/launch/test_launchers.py imports it as a plug-in and runs a study with
``launcher: {kind: in_turn}``."""

from __future__ import annotations

from nmt.launch.runs import Launch, Launcher, RunResult, bring_up
from nmt.setup.compare import LAUNCHERS


class InTurn(Launcher):
    def launch(self, job: Launch) -> list[RunResult]:
        outcomes = []
        for run in job.planned:
            with open(job.out / "launched.txt", "a", encoding="utf-8") as f:
                f.write(f"{run.variant} {run.seed}\n")
            outcomes.append(bring_up(run, job.splits, job.device, job.decodings))
        return outcomes


LAUNCHERS.register("in_turn", target=f"{__name__}:InTurn")
