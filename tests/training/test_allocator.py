"""After keep_freed_memory, large freed tensors are reused without faulting in
fresh pages."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Run in a fresh interpreter: the test process's heap depends on every earlier test.
PROBE = """
import json, resource, sys, torch
from nmt.training.allocator import keep_freed_memory

kept = keep_freed_memory() if sys.argv[1] == "keep" else None
x = torch.ones(50 * 2**18)  # 50 MB, touched: a step's large tensor
del x
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(8):  # the next steps allocate and free it again
    x = torch.ones(50 * 2**18)
    del x
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"kept": kept, "faults": faults}))
"""


def probe(mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_freed_blocks_are_reused_without_page_faults():
    kept = probe("keep")
    if not kept["kept"]:
        pytest.skip("the C library is not glibc")
    default = probe("default")
    pages = 50 * 2**20 // 4096  # one fresh 50 MB block
    assert default["faults"] > 6 * pages  # glibc maps and faults in each of 8 blocks anew
    assert kept["faults"] < 3 * pages  # kept: fresh pages twice at most (measured: twice)
