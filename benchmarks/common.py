"""Helpers shared by the benchmark scripts."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from nmt.errors import NmtError
from nmt.setup.recipe import load_recipe
from nmt.training.run import prepare
from nmt.training.signals import Terminated, terminable
from nmt.training.trainer import Trainer

SHARED_MULTI30K = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "multi30k"


def user_errors(main: Callable[[], None]) -> Callable[[], None]:
    """A benchmark script's ``main`` as an nmt command behaves: an error is one line
    on stderr and exit code 2 (a child ``nmt`` command that failed has said why on
    its own), SIGINT and SIGTERM exit 130 and 143; nothing half-written is left."""

    @functools.wraps(main)
    def wrapper() -> None:
        try:
            with terminable():
                main()
        except NmtError as e:
            print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
            sys.exit(2)
        except subprocess.CalledProcessError as e:
            what = " ".join(str(a) for a in e.cmd[1:5])
            print(f"error: {what} ... exited with {e.returncode} (said why above)", file=sys.stderr)
            sys.exit(2)
        except KeyboardInterrupt:
            print("interrupted (SIGINT)", file=sys.stderr)
            sys.exit(130)
        except Terminated:
            print("terminated (SIGTERM)", file=sys.stderr)
            sys.exit(143)

    return wrapper


def run_child(command: list[str], **popen) -> None:
    """Run a child command (``nmt train``) to its end: a signal to this script
    reaches it (it saves ``last.pt`` and stops) before this script stops, and a kill
    of this script that passes nothing on stops it too (NMT_WATCH_PARENT: it watches
    its parent); a failure raises CalledProcessError."""
    env = {**(popen.pop("env", None) or os.environ), "NMT_WATCH_PARENT": "1"}
    proc = subprocess.Popen(command, env=env, **popen)
    try:
        code = proc.wait()
    except BaseException:  # KeyboardInterrupt, Terminated: pass it on, then go
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        raise
    if code:
        raise subprocess.CalledProcessError(code, command)


def synchronizer(device: str | torch.device) -> Callable[[], None]:
    """What waits for ``device``'s queued work before a clock is read: CUDA runs
    asynchronously, the CPU does not."""
    return torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)


def host_syncs(step: Callable[[], object]) -> list[str]:
    """Where ``step`` makes the host wait for the GPU (a value read back, a copy to
    pageable memory), as ``file:line``, once per wait: CUDA's sync debug mode warns at
    each, from the Python line that asked. A wait leaves the GPU idle while the host
    queues the next work, which a small model's step cannot afford (issue #64)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return [f"{Path(w.filename).name}:{w.lineno}" for w in caught if "synchroniz" in str(w.message)]


class MatmulProbe:
    """The machine's matmul rate: times single n x n @ n x n products into a
    preallocated output, so page faults on a fresh output do not count (on 2 CPU
    cores, timing ``a @ b`` gave anything from 168 to 228 GFLOP/s where this gave
    207), and keeps the running totals."""

    def __init__(self, n: int, device: str = "cpu", dtype: torch.dtype = torch.float32) -> None:
        self.a = torch.randn(n, n, device=device, dtype=dtype)
        self.b = torch.randn(n, n, device=device, dtype=dtype)
        self.out = torch.empty(n, n, device=device, dtype=dtype)
        self.sync = synchronizer(device)
        self.flops = 2 * n**3
        self.total_flops, self.total_seconds = 0, 0.0
        torch.mm(self.a, self.b, out=self.out)  # warm-up

    def time_one(self) -> float:
        """Seconds for one product, added to the totals."""
        self.sync()
        start = time.perf_counter()
        torch.mm(self.a, self.b, out=self.out)
        self.sync()
        seconds = time.perf_counter() - start
        self.total_flops += self.flops
        self.total_seconds += seconds
        return seconds

    def gflops(self) -> float:
        """The rate over every product timed so far."""
        return self.total_flops / self.total_seconds / 1e9


def recipe_trainer(
    recipe: str, data: str, run_dir: str, device: str, overrides: list[str]
) -> Trainer:
    """The recipe's trainer, set up in ``run_dir`` on ``data``, with no step budget."""
    cfg = load_recipe(
        recipe, [f"data.dir={data}", f"run_dir={run_dir}", "train.max_steps=1000000", *overrides]
    )
    return prepare(cfg, device)
