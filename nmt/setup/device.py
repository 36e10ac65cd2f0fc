"""The ``--device`` option of every command: auto, cpu, cuda or cuda:N; and where a
run ran, for the figures that depend on it."""

from __future__ import annotations

import os
import platform
import re
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from nmt.errors import NmtError
from nmt.setup.allocator import allocator_in_use

CUDA_INDEX = re.compile(r"cuda:(\d+)")


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA where available, else the CPU; ``cuda:N`` is the N-th visible
    GPU (``cuda`` the current one). An unavailable device is a user error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    index = CUDA_INDEX.fullmatch(name)
    if name != "cuda" and index is None:
        raise NmtError(f"--device {name!r}: expected auto, cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        raise NmtError(f"--device {name}: no CUDA device is available")
    if index is None:
        return torch.device("cuda")
    count = torch.cuda.device_count()
    if int(index.group(1)) >= count:
        raise NmtError(f"--device {name}: only {count} CUDA device(s) are visible (0..{count - 1})")
    return torch.device("cuda", int(index.group(1)))


CPUINFO = Path("/proc/cpuinfo")  # Linux's; elsewhere absent


def cpuinfo_values(key_prefixes: tuple[str, ...], cpuinfo: Path = CPUINFO) -> list[str]:
    """The values of ``cpuinfo``'s lines whose key starts with one of ``key_prefixes``
    (one line per core), none where there is no such file."""
    lines = cpuinfo.read_text(errors="replace").splitlines() if cpuinfo.exists() else []
    return [x.split(":", 1)[1].strip() for x in lines if x.startswith(key_prefixes) and ":" in x]


def cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """The CPU's model name (``cpuinfo``), else what the platform says. A name with no
    model number in it (a virtual machine's "Intel(R) Xeon(R) Processor" or "Intel(R)
    Xeon(R) CPU @ 2.20GHz" covers several generations) gets the family and model
    numbers, and an Arm CPU, which Linux gives no name, its implementer and part
    numbers (0x41 and 0xd4f: Arm's Neoverse V2), so that two machines' timings are not
    taken for one's."""
    names = cpuinfo_values(("model name",), cpuinfo)
    if not names:  # Arm's Linux names no model: its implementer and part numbers do
        arm = cpuinfo_values(("CPU implementer", "CPU part"), cpuinfo)[:2]
        if len(arm) == 2:
            return f"{platform.machine()} CPU (implementer {arm[0]}, part {arm[1]})"
        return platform.processor() or "unknown"
    numbers = cpuinfo_values(("cpu family", "model\t"), cpuinfo)[:2]  # x86 Linux's
    if re.search(r"\d", names[0].split("@")[0]) or len(numbers) < 2:  # "@ 2.20GHz": no model
        return names[0]
    return f"{names[0]} (family {numbers[0]}, model {numbers[1]})"


BF16_FLAGS = {"avx512_bf16", "amx_bf16", "bf16"}  # x86's two, Arm's (its "Features" line)


def bf16_units(cpuinfo: Path = CPUINFO) -> bool | None:
    """Whether the CPU has bf16 dot-product instructions (AVX512-BF16 or AMX on x86,
    BF16 on Arm), from ``cpuinfo``'s flag lines; None where there are none to read
    (not Linux). Without them bf16 products are emulated."""
    flags = {f for line in cpuinfo_values(("flags", "Features"), cpuinfo) for f in line.split()}
    return bool(flags & BF16_FLAGS) if flags else None


def cores() -> int:
    """The CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def load_average() -> float | None:
    """The load average over the last minute (work besides this one slows it down);
    None where the platform has none."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


# Besides torch, the libraries whose version can change a run's figures: SentencePiece
# trains its vocabulary, NumPy draws the bootstrap's resamples, sacreBLEU scores it.
LIBRARIES = ("sentencepiece", "numpy", "sacrebleu")


def library_versions() -> dict[str, str | None]:
    """The installed version of each of :data:`LIBRARIES` (None: not installed)."""
    found: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def where_it_ran(device: torch.device) -> dict[str, Any]:
    """What a timing depends on: the host, its CPU and the cores this process may use,
    the memory allocator, PyTorch's threads and version, the device (a GPU by name)
    and the load average; and what else its figures may depend on (the same seed and
    recipe trained to other BLEU on another machine: docs/compare.md): the versions
    of :data:`LIBRARIES`, and the instruction set of PyTorch's own CPU kernels
    (``kernels``: AVX2, AVX512, ...; ATen picks it for the CPU, ``ATEN_CPU_CAPABILITY``
    overrides it, and on one machine another set alone trains other losses)."""
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    return {
        "host": platform.node(),
        "cpu": cpu_model(),
        "bf16_units": bf16_units(),
        "allocator": allocator_in_use(),
        "cores": cores(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "libraries": library_versions(),
        "kernels": torch.backends.cpu.get_cpu_capability(),
        "device": str(device) if gpu is None else f"{device} ({gpu})",
        "load": load_average(),
    }
