"""The suite's guard (tests/conftest.py's ``_isolated``), run on a small project of
its own: a test that leaves process state changed fails, naming it, and the next
test starts from the state before it."""

from __future__ import annotations

import importlib

import pytest

pytest_plugins = ("pytester",)

LEAKS = """
import os, torch

def test_a_leaks():
    torch.set_grad_enabled(False)
    os.environ["NMT_LEAKED"] = "1"

def test_b_starts_clean():
    assert torch.is_grad_enabled() and "NMT_LEAKED" not in os.environ
"""


@pytest.fixture(scope="module")  # a wider scope: made before pytester's snapshot
def dynamo_imported() -> None:
    """TorchDynamo, imported before pytester notes the modules it will forget. The
    guard's restoring of torch's modes imports it in the inner session; forgotten,
    the next test that trains in this worker imports it again, and its operator
    library cannot register twice in one process."""
    importlib.import_module("torch._dynamo")


@pytest.mark.slow  # a pytest session of its own: a second or more
def test_a_test_that_leaks_fails_naming_it_and_the_next_starts_clean(
    dynamo_imported: None, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # no random order
    pytester.makeconftest("from tests.conftest import _isolated  # noqa: F401\n")
    pytester.makepyfile(test_leaks=LEAKS)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        ["*the test leaked the environment variables NMT_LEAKED; torch's modes*(restored)*"]
    )
