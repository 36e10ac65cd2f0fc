"""The ``--device`` option of every command: auto, cpu or cuda."""

from __future__ import annotations

import torch

from nmt.errors import NmtError


def resolve_device(name: str) -> torch.device:
    """``auto`` is CUDA where available, else the CPU; an unavailable device is a
    user error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise NmtError("--device cuda: no CUDA device is available")
    if name not in ("cpu", "cuda"):
        raise NmtError(f"--device {name!r}: expected auto, cpu or cuda")
    return torch.device(name)
