"""After keep_freed_memory, large freed tensors stay in the process and are reused."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Run in a fresh interpreter: the test process's heap depends on every earlier test.
PROBE = """
import json, os, sys, torch
from nmt.training.allocator import keep_freed_memory

def resident_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

kept = keep_freed_memory() if sys.argv[1] == "keep" else None
for _ in range(2):  # a step's tensors, allocated and freed
    x = torch.ones(50 * 2**18)  # 50 MB, touched
    del x
settled, grown, freed = resident_mb(), [], []
for _ in range(3):
    x = torch.ones(50 * 2**18)
    grown.append(resident_mb() - settled)
    del x
    freed.append(resident_mb() - settled)
print(json.dumps({"kept": kept, "grown": max(grown), "freed": min(freed)}))
"""


def probe(mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux's /proc")
def test_freed_blocks_are_kept_and_reused():
    kept = probe("keep")
    if not kept["kept"]:
        pytest.skip("the C library is not glibc")
    assert kept["grown"] < 25  # the freed block again: no new pages
    assert kept["freed"] > -25  # and not handed back to the system
    default = probe("default")  # what the setting changes
    assert default["grown"] > 25
