"""The ``--device`` option of every command: auto, cpu, cuda or cuda:N."""

from __future__ import annotations

import re

import torch

from nmt.errors import NmtError

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
