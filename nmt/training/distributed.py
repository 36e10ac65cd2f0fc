"""Data parallelism with PyTorch's DistributedDataParallel under ``torchrun``.

``torchrun --nproc_per_node=N -m nmt train RECIPE`` (or ``nmt train RECIPE --nproc N``)
starts N ranks; each takes a disjoint share of every epoch's token batches, DDP
averages the gradients (gloo on CPU, NCCL on CUDA), and only rank 0 writes logs
and checkpoints. Multi-node runs use torchrun's own rendezvous options.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass

import torch
import torch.distributed as dist

from nmt.errors import NmtError
from nmt.setup.device import resolve_device


@dataclass(frozen=True)
class Distributed:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world > 1

    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sum over ranks (a no-op for one process)."""
        if not self.enabled:
            return values
        t = torch.tensor(values, dtype=torch.float64, device=self._device())
        dist.all_reduce(t)
        return t.tolist()

    def any(self, flag: bool) -> bool:
        """True on every rank if it is true on any."""
        return bool(self.sum([float(flag)])[0]) if self.enabled else flag

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def close(self) -> None:
        if self.enabled and dist.is_initialized():
            dist.destroy_process_group()

    def gather(self, obj: object) -> list[object]:
        """Every rank's ``obj``, in rank order, on every rank."""
        if not self.enabled:
            return [obj]
        out: list[object] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def _device(self) -> torch.device:
        backend = dist.get_backend()
        return torch.device("cuda", self.local_rank) if backend == "nccl" else torch.device("cpu")


def from_env(device_type: str) -> Distributed:
    """Join the process group that torchrun describes in the environment, if any."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Distributed()
    if not dist.is_initialized():
        # TorchDynamo, imported by DDP's constructor, takes references to every
        # process group that exists when it is first imported, and they outlive
        # destroy_process_group: gloo's worker threads then run on into interpreter
        # shutdown, and one that drops a finished collective's tensor there aborts
        # the rank ("terminate called without an active exception"). Imported first,
        # it holds none, and close() joins the threads.
        import torch._dynamo  # noqa: F401

        dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
    return Distributed(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0)))


def refuse_missing_gpus(nproc: int, device: str) -> None:
    """Before ``nproc`` ranks start: a device that is not there (``--device cuda``
    without CUDA), or fewer GPUs than ranks (each CUDA rank takes its own), is one
    error from the launcher, not one from every rank among torchrun's lines."""
    where = resolve_device(device)
    if where.type == "cuda" and nproc > (visible := torch.cuda.device_count()):
        raise NmtError(
            f"--nproc {nproc}: each process trains on a GPU of its own, and {visible} "
            f"{'is' if visible == 1 else 'are'} visible (--device cpu: processes on the CPU)"
        )


def launch(nproc: int, argv: list[str]) -> int:
    """Run ``nmt argv`` in ``nproc`` local processes through torchrun's own launcher
    (PyTorch's elastic agent, run in this process); the exit code. SIGINT or SIGTERM
    sent to this process alone (a scheduler signals the process it started) reaches
    the agent, which passes it to every rank: each saves ``last.pt`` and stops, and
    the exit code is the shell's 128 + N, with no traceback. The agent's files (each
    rank's error record, read to name a failed rank) go to a temporary directory that
    is removed when it ends, not to a ``torchelastic_*`` directory left in /tmp for
    every run."""
    with tempfile.TemporaryDirectory(prefix="nmt-ranks-") as logs:
        return _run_agent(nproc, argv, logs)


def _run_agent(nproc: int, argv: list[str], logs: str) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    args = parse_args(
        ["--standalone", f"--nproc_per_node={nproc}", f"--log-dir={logs}", "-m", "nmt", *argv]
    )
    try:
        run(args)
    except SignalException as e:
        return 128 + int(e.sigval)
    except ChildFailedError as e:  # each rank said why on stderr; say which stopped first
        rank, failure = e.get_first_failure()
        code = failure.exitcode if failure.exitcode > 0 else 128 - failure.exitcode
        how = (
            f"was killed by signal {-failure.exitcode}"
            if failure.exitcode < 0
            else (f"exited with code {failure.exitcode}")
        )
        print(
            f"error: rank {rank} (pid {failure.pid}) {how}; the others were stopped",
            file=sys.stderr,
        )
        return code
    return 0
