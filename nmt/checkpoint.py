"""Atomic checkpoint writes and safe loads (``torch.load(weights_only=True)`` only)."""

from __future__ import annotations

import errno
import fcntl
import glob
import json
import os
import pickle
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import torch

from nmt.errors import NmtError

FORMAT = "nmt-checkpoint"
VERSION = 1


@contextmanager
def atomic_file(path: str | Path) -> Iterator[BinaryIO]:
    """A file to write ``path`` through, for the block.

    A regular file or a new path is written to a temp file beside it, which is
    fsynced and renamed over ``path`` when the block ends: a crash at any moment
    leaves either the old file or the new one, never a half-written one, and a
    failure removes the temp file and names ``path``. A symlink is followed (its
    target is replaced, the link kept); a device or FIFO (``/dev/null``, a
    terminal, a pipe) is written in place, never replaced by a regular file.
    """
    path = Path(path)
    try:
        target = path.resolve() if path.is_symlink() else path
    except (OSError, RuntimeError) as e:  # a symlink loop
        raise NmtError(f"{path}: cannot write ({getattr(e, 'strerror', None) or e})") from None
    if target.is_dir():
        raise NmtError(f"{path}: is a directory")
    if target.exists() and not target.is_file():
        try:
            with open(target, "wb") as f:
                yield f
        except OSError as e:
            raise NmtError(f"{path}: cannot write ({e.strerror or e})") from None
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_dead_temps(target)
        fd, tmp = tempfile.mkstemp(
            prefix=f".{target.name}.{os.getpid()}.", suffix=".tmp", dir=target.parent
        )
    except OSError as e:
        raise NmtError(f"{path}: cannot write ({e.strerror or e})") from None
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600; give the file normal permissions
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise NmtError(f"{path}: cannot write ({e.strerror or e})") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def remove_dead_temps(path: Path) -> None:
    """Delete the temp files (or directories) for ``path`` that a killed writer
    (kill -9, a power cut) left beside it: ``.NAME.PID.*tmp``, named with the id of
    a process that is gone."""
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*tmp"):
        pid = tmp.name[len(path.name) + 2 :].split(".", 1)[0]
        if pid.isascii() and pid.isdigit() and not alive(int(pid)):
            if tmp.is_dir() and not tmp.is_symlink():
                shutil.rmtree(tmp, ignore_errors=True)
            else:
                tmp.unlink(missing_ok=True)


def atomic_write(path: str | Path, write: Any) -> None:
    """Call ``write(file)`` on an :func:`atomic_file` for ``path``."""
    with atomic_file(path) as f:
        write(f)


def remove_stale_temps(directory: str | Path) -> int:
    """Delete temp files that a killed ``atomic_write`` left in ``directory``."""
    stale = [p for p in Path(directory).glob(".*.tmp") if p.is_file()]
    for p in stale:
        p.unlink(missing_ok=True)
    return len(stale)


@contextmanager
def held(lock: Path) -> Iterator[None]:
    """Hold an advisory ``flock`` on the file ``lock`` (created if absent) for the
    block, waiting while another process holds it: for short read-modify-write
    sections that two processes may reach at once."""
    try:
        f = open(lock, "w")
    except OSError as e:
        raise NmtError(f"{lock}: cannot create ({e.strerror or e})") from None
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def write_text(path: str | Path, text: str) -> None:
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def append_line(path: str | Path, line: str) -> None:
    """Append one line whole or not at all: a failed write (a full disk) is cut back
    to the previous end, so readers never meet a torn last line of ours."""
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    except OSError as e:
        raise NmtError(f"{path}: cannot write ({e.strerror or e})") from None
    try:
        end = os.fstat(fd).st_size
        try:
            if os.write(fd, data) != len(data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError as e:
            os.ftruncate(fd, end)
            raise NmtError(f"{path}: cannot write ({e.strerror or e})") from None
    finally:
        os.close(fd)


def read_json(path: str | Path) -> Any:
    """A JSON run file (results, summary), None if there is none; a damaged one is
    an error naming it."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise NmtError(f"{path}: damaged ({type(e).__name__}); delete it to rebuild it") from None


def is_number(value: Any) -> bool:
    """Whether a value read from a JSON run file is a number (true and false are not)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


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
    if payload.get("version") != VERSION:
        raise NmtError(
            f"{path}: checkpoint format version {payload.get('version')!r} is not "
            f"supported (this nmt reads version {VERSION})"
        )
    return payload
