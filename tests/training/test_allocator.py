"""After keep_freed_memory, a large tensor comes from the heap and its memory stays
in the process once freed, so the next step reuses it instead of faulting in
fresh pages. glibc's own counters (mallinfo2) tell where the block lives; page
fault counts depend on the heap's layout and are left to the benchmark
(``benchmarks/train_throughput.py`` prints faults per step)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Run in a fresh interpreter: the test process's heap depends on every earlier test.
PROBE = """
import ctypes, json, sys, torch
from nmt.training.allocator import keep_freed_memory

class MallInfo2(ctypes.Structure):  # glibc >= 2.33, malloc.h
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd",
        "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
if not hasattr(libc, "mallinfo2"):
    print(json.dumps(None))
    sys.exit()
libc.mallinfo2.restype = MallInfo2
kept = keep_freed_memory() if sys.argv[1] == "keep" else None
x = torch.ones(50 * 2**18)  # 50 MB: a step's large tensor
live = libc.mallinfo2()
del x
freed = libc.mallinfo2()
print(json.dumps({"kept": kept, "mapped_while_live": live.hblkhd,
                  "free_in_heap": freed.fordblks}))
"""
BLOCK = 50 * 2**20


def probe(mode: str) -> dict | None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_freed_blocks_stay_in_the_heap():
    kept = probe("keep")
    if kept is None or not kept["kept"]:
        pytest.skip("the C library is not glibc 2.33 or newer")
    default = probe("default")
    assert default["mapped_while_live"] >= BLOCK  # glibc's default: its own mmap...
    assert default["free_in_heap"] < BLOCK  # ...returned to the system on free
    assert kept["mapped_while_live"] < BLOCK  # kept: served from the heap...
    assert kept["free_in_heap"] >= BLOCK  # ...and still there, free, for the next step
