"""Checkpoints: written atomically (nmt.io.files), loaded safely (``torch.load(weights_only=True)``
only) and checked (checksums, entries, shapes, dtypes, finite weights)."""

from __future__ import annotations

import errno
import os
import pickle
import shutil
import zipfile
from pathlib import Path
from typing import Any

import torch

from nmt.errors import NmtError
from nmt.io.files import atomic_write
from nmt.setup.migrations import VERSION, upgrade_checkpoint

FORMAT = "nmt-checkpoint"


def check_entries(payload: dict[str, Any], path: str | Path, kinds: dict[str, type]) -> None:
    """Fail, naming ``path``, unless each entry of ``kinds`` is there with its type."""
    for key, kind in kinds.items():
        if not isinstance(payload.get(key), kind):
            what = "no" if key not in payload else f"a damaged ({type(payload[key]).__name__})"
            raise NmtError(f"{path}: not a usable checkpoint: {what} {key!r} entry")


def check_finite(weights: dict[str, Any], path: str | Path) -> None:
    """Fail, naming ``path``, if a floating-point tensor holds NaN or infinity.
    Training never saves one (such updates are skipped), so in a checkpoint it is
    damage."""
    floats = {
        k: v for k, v in weights.items() if isinstance(v, torch.Tensor) and v.is_floating_point()
    }
    for name, value in floats.items():
        if not bool(torch.isfinite(value).all()):
            raise NmtError(f"{path}: damaged: {name} holds NaN or infinite values")


def save(path: str | Path, payload: dict[str, Any]) -> None:
    """Write a checkpoint atomically, stamped with the format and version. PyTorch's
    writer reports a failed write (a full disk) as a RuntimeError: it becomes an
    OSError, so ``atomic_write`` names the file and keeps the previous checkpoint."""
    payload = {"format": FORMAT, "version": VERSION, **payload}

    def write(f: Any) -> None:
        try:
            torch.save(payload, f)
        except RuntimeError as e:
            if shutil.disk_usage(Path(path).parent).free < (1 << 20):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)) from None
            first = str(e).strip().splitlines()[0][-120:] if str(e).strip() else "failed"
            raise OSError(errno.EIO, f"write failed: {first}") from None

    atomic_write(path, write)


def no_best(run_dir: Path) -> str:
    """The error for a directory without best.pt: what it holds instead, said as
    the way on."""
    # a study's out_dir holds runs/VARIANT/seedN: three levels down at most
    found = [p for depth in (1, 2, 3) for p in run_dir.glob("*/" * depth + "best.pt")]
    runs = sorted(str(p.parent.relative_to(run_dir)) for p in found)
    if runs:
        shown = ", ".join(runs[:5]) + (", ..." if len(runs) > 5 else "")
        return f"{run_dir}: no best.pt; it holds the runs {shown}: name them instead"
    if (run_dir / "last.pt").is_file():
        return f"{run_dir}: no best.pt; it has not validated yet: name its last.pt (latest weights)"
    return f"{run_dir}: no best.pt (not a run directory)"


def not_a_checkpoint(path: Path) -> str | None:
    """What a file is when it cannot be a checkpoint (``torch.save`` writes a zip
    archive, older PyTorch a pickle): a text file, a recipe, or an unknown format;
    None when it may be one. torch.load would call a recipe "unsafe content"."""
    with open(path, "rb") as f:
        head = f.read(4096)
    if head.startswith(b"PK\x03\x04") or head[:1] == b"\x80":
        return None
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return "neither a zip archive nor a pickle"
    if path.suffix in (".yaml", ".yml"):
        return "a YAML file: a recipe is trained with nmt train, which writes RUN/best.pt"
    return "a text file" if head else "an empty file"


def check_archive(path: Path) -> None:
    """Fail, naming ``path``, unless every member of the zip archive that
    ``torch.save`` wrote matches the CRC-32 written beside it. torch.load reads
    the members without checking them, so flipped bytes in a file of unchanged
    size would load as other weights."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
        raise NmtError(
            f"{path}: not a readable checkpoint (truncated or corrupt: {type(e).__name__})"
        ) from None
    if bad is not None:
        raise NmtError(f"{path}: damaged: {bad} does not match its checksum (CRC-32)")


def check_dtypes(weights: dict[str, Any], expected: dict[str, Any], path: str | Path) -> None:
    """Fail, naming ``path``, if a tensor of ``weights`` has another dtype than the
    model's own (``expected``): copied into the model it would be cast silently."""
    for name, value in weights.items():
        want = expected.get(name)
        if isinstance(value, torch.Tensor) and want is not None and value.dtype != want.dtype:
            raise NmtError(f"{path}: damaged: {name} is {value.dtype}, the model's is {want.dtype}")


def load(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint without executing code; every failure is one clear line."""
    path = Path(path)
    if path.is_dir():
        if not (path / "best.pt").is_file():
            raise NmtError(no_best(path))
        path = path / "best.pt"
    if not path.is_file():
        raise NmtError(f"{path}: no such checkpoint")
    if (kind := not_a_checkpoint(path)) is not None:
        raise NmtError(f"{path}: not a readable checkpoint ({kind})")
    if zipfile.is_zipfile(path):  # torch's legacy format (a plain pickle) has no checksums
        check_archive(path)
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        # PyTorch's message advises weights_only=False, the one thing not to do here:
        # keep only the line naming what was refused.
        lines = [x.strip() for x in str(e).splitlines() if "GLOBAL" in x or "global" in x]
        what = lines[0][:200] if lines else "unsafe content"
        raise NmtError(
            f"{path}: refused to load: not a plain nmt checkpoint ({what}); an nmt "
            "checkpoint holds only tensors and plain values"
        ) from None
    except Exception as e:  # torch.load on arbitrary bytes raises many kinds of error
        raise NmtError(
            f"{path}: not a readable checkpoint (truncated or corrupt: {type(e).__name__})"
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise NmtError(f"{path}: not an nmt checkpoint")
    return upgrade_checkpoint(payload, path)
