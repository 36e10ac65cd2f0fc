"""What each test costs in CPU, for deciding its tier: ``pytest --cpu-times FILE``
(tests/conftest.py loads this plug-in) appends one tab-separated line per test to
FILE (its node id, wall seconds, CPU seconds of the process that ran it, CPU seconds
of the child processes it waited for, the xdist worker that ran it or ``main``, and
when it ended in seconds since the epoch), from every xdist worker. A test's wall
time under xdist shares the cores with the other worker; its CPU time does not, so
the slow marker's rule (pyproject.toml) is read from these columns; the last two say
when each worker finished, and so how evenly the workers were loaded."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-times",
        metavar="FILE",
        help="append each test's node id, wall, own CPU and children's CPU seconds, worker and "
        "end time to FILE",
    )


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Times setup, call and teardown together: a fixture the test builds is its cost."""
    path = item.config.getoption("--cpu-times")
    if not path:
        return (yield)
    start = time.perf_counter()
    own, children = cpu_seconds(resource.RUSAGE_SELF), cpu_seconds(resource.RUSAGE_CHILDREN)
    try:
        return (yield)
    finally:
        line = (
            f"{item.nodeid}\t{time.perf_counter() - start:.3f}\t"
            f"{cpu_seconds(resource.RUSAGE_SELF) - own:.3f}\t"
            f"{cpu_seconds(resource.RUSAGE_CHILDREN) - children:.3f}\t"
            f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}\t{time.time():.3f}\n"
        )
        # one short write with O_APPEND: the workers' lines do not interleave
        fd = os.open(Path(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
