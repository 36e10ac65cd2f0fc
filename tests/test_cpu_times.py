"""tests/cpu_times.py: ``--cpu-times FILE`` gives one line per test with the CPU of
the process that ran it and of the children it waited for, and nothing without it."""

from __future__ import annotations

import os

import pytest

pytest_plugins = ("pytester",)

TESTS = """
import subprocess, sys, time

def busy(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

def test_works_itself():
    busy(0.3)

def test_waits_for_a_child():
    code = "import time\\nend = time.process_time() + 0.3\\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", code], check=True)

def test_idles():
    time.sleep(0.3)
"""


def test_each_test_gets_its_own_and_its_childrens_cpu(pytester: pytest.Pytester):
    pytester.makepyfile(test_costs=TESTS)
    out = pytester.path / "times.tsv"
    done = pytester.runpytest("-p", "tests.cpu_times", "-p", "no:randomly", "--cpu-times", out)
    done.assert_outcomes(passed=3)
    rows, ends = {}, []
    for line in out.read_text().splitlines():
        node, wall, own, children, worker, ended = line.split("\t")
        rows[node.split("::")[1]] = (float(wall), float(own), float(children))
        assert worker == os.environ.get("PYTEST_XDIST_WORKER", "main")  # pytester: in-process
        ends.append(float(ended))
    assert ends == sorted(ends) and ends[-1] - ends[0] >= 0.29  # the tests, in turn
    assert set(rows) == {"test_works_itself", "test_waits_for_a_child", "test_idles"}
    assert rows["test_works_itself"][1] >= 0.29 and rows["test_works_itself"][2] < 0.1
    assert rows["test_waits_for_a_child"][2] >= 0.29
    wall, own, children = rows["test_idles"]
    assert wall >= 0.29 and own < 0.1 and children < 0.1


def test_without_the_option_nothing_is_written(pytester: pytest.Pytester):
    pytester.makepyfile(test_costs=TESTS)
    done = pytester.runpytest("-p", "tests.cpu_times", "-p", "no:randomly", "-k", "idles")
    done.assert_outcomes(passed=1, deselected=2)
    assert not [p for p in pytester.path.iterdir() if p.is_file() and p.name != "test_costs.py"]
