"""The suite's own schedule (tests/conftest.py): under N xdist workers the collected
tests are put in N blocks, one per worker, slow modules first and whole; none is
added or dropped. Checked on real items that pytest collects from a small project
of modules with and without slow tests."""

from __future__ import annotations

import pytest

from tests.conftest import pytest_collection_modifyitems, slow_tests, worker_blocks

pytest_plugins = ("pytester",)

SLOW = "import pytest\n\n@pytest.mark.slow\ndef test_slow_{i}(): pass\n"
QUICK = "def test_quick_{i}(): pass\n"


def module(item: pytest.Item) -> str:
    return item.nodeid.split("::")[0]


@pytest.fixture
def items(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> list[pytest.Item]:
    """Eight modules: four with slow tests (1, 2, 5 and 1 of them, some beside quick
    ones), four with quick tests only (3, 7, 1 and 12), collected in file order (no
    plug-in loaded: pytest-randomly would shuffle them)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    pytester.makeini("[pytest]\nmarkers = slow: a slow test\n")
    layout = {"a": (1, 2), "b": (0, 3), "c": (2, 0), "d": (0, 7), "e": (5, 4), "f": (0, 1)}
    layout |= {"g": (1, 0), "h": (0, 12)}
    for name, (slow, quick) in layout.items():
        body = "".join(SLOW.format(i=i) for i in range(slow))
        body += "".join(QUICK.format(i=i) for i in range(quick))
        pytester.makepyfile(**{f"test_{name}": body})
    found, _ = pytester.inline_genitems()
    assert len(found) == 38
    return found


@pytest.mark.parametrize("workers", [2, 3, 5])
def test_every_test_is_in_one_block_once_slow_modules_first_and_whole(items, workers):
    blocks = worker_blocks(items, workers)
    assert len(blocks) == workers
    assert sorted(i.nodeid for b in blocks for i in b) == sorted(i.nodeid for i in items)
    heavy = {module(i) for i in items if slow_tests([i])}
    for block in blocks:
        kinds = [module(item) in heavy for item in block]
        assert kinds == sorted(kinds, reverse=True)  # the slow tier's modules first
    for name in heavy:  # each whole in one block, its tests together
        (holding,) = [b for b in blocks if any(module(i) == name for i in b)]
        at = [j for j, i in enumerate(holding) if module(i) == name]
        assert at == list(range(at[0], at[0] + len(at)))


@pytest.mark.parametrize("workers", [2, 3])
def test_the_blocks_split_where_worksteal_splits_and_share_the_slow_tests(items, workers):
    """worksteal's first split gives the k-th of N workers n // (N - k) of the n tests
    left; each module of slow tests (1, 2, 5 and 1 of them) goes to the block with the
    fewest so far, so that no block has more than the largest module's 5 over another."""
    blocks = worker_blocks(items, workers)
    left = len(items)
    for k, block in enumerate(blocks):
        assert len(block) == left // (workers - k)
        left -= len(block)
    counts = [slow_tests(block) for block in blocks]
    assert sum(counts) == 9 and max(counts) - min(counts) <= 5, counts


def test_one_worker_keeps_the_order(items, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "1")
    order = list(items)
    pytest_collection_modifyitems(order)
    assert order == items
