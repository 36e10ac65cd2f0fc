"""tests/completeness.py: a pytest run that collects a test and never reports it
fails, names the test, and says so also under xdist; a complete run, a run
stopped by ``-x`` and ``--collect-only`` are left as they were."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parents[1]

TESTS = """
def test_kept():
    pass

def test_dropped():
    pass

def test_failing():
    assert False
"""

# a hook that claims test_dropped as run without running or reporting it, as a lost
# queue entry would leave it
DROPS = """
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    return True if item.name == "test_dropped" else None
"""

NAMED = ["1 collected test(s) never reported*", "  test_three.py::test_dropped"]


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_three=TESTS)
    return pytester


def run(suite: pytest.Pytester, *args: str) -> pytest.RunResult:
    return suite.runpytest("-p", "tests.completeness", "-p", "no:randomly", *args)


def test_a_complete_run_keeps_its_outcome(suite):
    done = run(suite)
    done.assert_outcomes(passed=2, failed=1)
    assert done.ret == pytest.ExitCode.TESTS_FAILED
    assert "never reported" not in done.stdout.str()


def test_a_test_never_reported_fails_the_run_and_is_named(suite):
    suite.makeconftest(DROPS)
    suite.makepyfile(test_three=TESTS.replace("assert False", "pass"))
    done = run(suite)
    done.assert_outcomes(passed=2)
    assert done.ret == pytest.ExitCode.TESTS_FAILED
    done.stdout.fnmatch_lines(NAMED)


@pytest.mark.parametrize("args", [("-x",), ("--collect-only",)])
def test_a_run_stopped_early_is_not_counted_against(suite, args):
    suite.makeconftest(DROPS)
    done = run(suite, *args)
    assert "never reported" not in done.stdout.str()


@pytest.mark.slow
def test_under_xdist_the_controller_counts_every_workers_tests(suite, monkeypatch):
    suite.makeconftest(DROPS)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), *sys.path]))
    done = suite.runpytest_subprocess("-p", "tests.completeness", "-p", "no:randomly", "-n", "2")
    assert done.ret == pytest.ExitCode.TESTS_FAILED
    done.stdout.fnmatch_lines(NAMED)
