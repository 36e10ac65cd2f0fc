"""A pytest plugin: a run that ends with a collected test never reported fails and
names it.

Under pytest-xdist a test can be collected and then never run (a worker's queue
lost, a hook that returns early), and the run still ends green with one test fewer
in its count: nothing tells "2,044 passed" from "2,045 passed, one never ran"
(djust-org/djust#2746 saw the same). The controller knows both sides: the tests
each worker collected (``pytest_xdist_node_collection_finished``) or, without
xdist, the session's items; and every report that came back. A run that was not
stopped early (``-x``, ``--maxfail``, Ctrl-C, ``--collect-only``) and lacks a
report for a collected test fails with exit code 1 and lists what is missing."""

from __future__ import annotations

import pytest


class Completeness:
    """The tests collected and the tests reported, in one pytest run."""

    def __init__(self) -> None:
        self.collected: set[str] = set()
        self.reported: set[str] = set()
        self.missing: list[str] = []

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # without xdist (with it, the controller collects nothing)
        self.collected.update(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: object, ids: list[str]) -> None:
        self.collected.update(ids)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.reported.add(report.nodeid)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        stopped = session.shouldstop or session.shouldfail or session.config.option.collectonly
        if stopped or exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            return
        self.missing = sorted(self.collected - self.reported)
        if self.missing:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.missing:
            terminalreporter.write_line(
                f"{len(self.missing)} collected test(s) never reported (not run, not counted):",
                red=True,
            )
            for nodeid in self.missing:
                terminalreporter.write_line(f"  {nodeid}", red=True)


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller, or a run without xdist
        config.pluginmanager.register(Completeness(), "completeness")
