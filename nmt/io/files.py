"""Writing files whole or not at all, and reading the small JSON files of a run.

Every file nmt writes goes through :func:`atomic_file`: a temp file beside the
target, fsynced and renamed over it, so a crash, a full disk or a signal leaves
the old file or the new one, never a torn one; symlinks are followed, devices
and FIFOs written in place, and the temp files of killed writers removed.
"""

from __future__ import annotations

import errno
import glob
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import portalocker

from nmt.errors import NmtError


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
    except OSError as e:
        raise NmtError(f"{path}: cannot write ({e.strerror or e})") from None
    try:
        fd, tmp = _temp_file(target)
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
        _remove_own_temps(target)
        raise NmtError(f"{path}: cannot write ({e.strerror or e})") from None
    except BaseException:
        _remove_own_temps(target)
        raise


def _temp_file(path: Path) -> tuple[int, str]:
    """A new temp file beside ``path`` for this process to write it through:
    ``.NAME.PID.*.tmp`` (what :func:`remove_dead_temps` parses)."""
    return tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)


def _remove_own_temps(path: Path) -> None:
    """Delete this process's temp files of ``path``, found by their name: a signal can
    unwind a write between a temp file's creation and mkstemp's return, before the
    writer holds its name."""
    prefix = f".{path.name}.{os.getpid()}."
    for temp in path.parent.glob(f"{glob.escape(prefix)}*.tmp"):
        temp.unlink(missing_ok=True)


JOURNAL = ".nmt-renames.json"  # the renames of atomic_files, while they are under way
WRITING = ".nmt-writing.lock"  # held by a process writing a set of files into a directory


@contextmanager
def atomic_files(paths: list[Path]) -> Iterator[list[BinaryIO]]:
    """Files in one directory written together, all kept or none: each through a
    temp file; when the block ends, a journal naming every rename is written, the
    temps are renamed over their paths and the journal removed. A crash between two
    renames leaves the journal, and :func:`finish_renames` (which every writer and
    reader of such files calls first) completes them, so a reader never meets one
    file of the new set beside another of the old."""
    directory = paths[0].parent
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise NmtError(f"{directory}: cannot write ({e.strerror or e})") from None
    finish_renames(directory)
    temps: list[Path] = []
    try:
        with ExitStack() as stack:
            handles = []
            for path in paths:
                fd, tmp = _temp_file(path)
                temps.append(Path(tmp))
                handles.append(stack.enter_context(os.fdopen(fd, "wb")))
            yield handles
            for f in handles:
                f.flush()
                os.fsync(f.fileno())
        renames = [[t.name, p.name] for t, p in zip(temps, paths)]
        write_text(directory / JOURNAL, json.dumps(renames))
        finish_renames(directory)
    except OSError as e:
        raise NmtError(f"{directory}: cannot write ({e.strerror or e})") from None
    finally:
        for path in paths:
            _remove_own_temps(path)


def finish_renames(directory: Path) -> None:
    """Complete the renames an :func:`atomic_files` journal in ``directory`` names
    (a crash cut them short), then remove it; nothing when there is none."""
    journal = directory / JOURNAL
    if not journal.is_file():
        return
    try:
        renames = json.loads(journal.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        renames = []  # torn before it was renamed into place: no rename had begun
    for tmp, name in renames if isinstance(renames, list) else []:
        if plain(tmp) and plain(name) and (directory / tmp).is_file():
            os.replace(directory / tmp, directory / name)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    journal.unlink(missing_ok=True)


def settled(directory: Path) -> None:
    """Before reading files of ``directory`` that :func:`atomic_files` writes: when a
    set's renames are under way or were cut short, wait for their writer (it holds
    the directory's lock) and complete them."""
    if (directory / JOURNAL).is_file():
        with held(directory / WRITING):
            finish_renames(directory)


def plain(name: Any) -> bool:
    """Whether a name read from a journal is a file name in its directory, not a path."""
    return isinstance(name, str) and bool(name) and "/" not in name and name not in (".", "..")


def atomic_write(path: str | Path, write: Any) -> None:
    """Call ``write(file)`` on an :func:`atomic_file` for ``path``."""
    with atomic_file(path) as f:
        write(f)


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


def remove_stale_temps(directory: str | Path) -> int:
    """Delete temp files that a killed ``atomic_write`` left in ``directory``."""
    stale = [p for p in Path(directory).glob(".*.tmp") if p.is_file()]
    for p in stale:
        p.unlink(missing_ok=True)
    return len(stale)


@contextmanager
def held(lock: Path) -> Iterator[None]:
    """Hold an advisory lock on the file ``lock`` (created if absent) for the block,
    waiting while another process holds it: for short read-modify-write sections
    that two processes may reach at once. portalocker (flock on POSIX, the Windows
    equivalent there): the lock goes with the process, even one killed outright."""
    try:
        f = open(lock, "w")
    except OSError as e:
        raise NmtError(f"{lock}: cannot create ({e.strerror or e})") from None
    with f:
        portalocker.lock(f, portalocker.LOCK_EX)
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
