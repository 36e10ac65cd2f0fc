"""The memory allocator of nmt's processes: TCMalloc where it is installed.

glibc's malloc keeps much of the heap a CPU training step frees (half a gigabyte of a
bf16 run, which ``malloc_trim`` gave back). TCMalloc (Ghemawat and Menage, "TCMalloc:
Thread-Caching Malloc", gperftools) keeps freed blocks by size class, and PyTorch's own
CPU launcher ``torch.backends.xeon.run_cpu`` preloads it where it finds it. Under it
the same runs end with the same parameters and translations, faster and, in bf16, in
less memory (docs/benchmarks.md, "An allocator chosen by nmt itself").

A process chooses its allocator before its first allocation, so ``nmt``'s entry point
starts itself again with ``LD_PRELOAD`` naming the library (``os.execve`` keeps the
process id, the arguments, the standard streams and the signals it ignores), and the
processes it starts (study workers, DDP ranks, SLURM jobs) inherit the variable.
``NMT_ALLOCATOR`` chooses: ``auto`` (tcmalloc where found, else the system's),
``tcmalloc`` (one line and exit 2 where it is not found) or ``system``. An
``LD_PRELOAD`` that already names another allocator is the user's choice and is kept
(``tcmalloc`` then refuses in one line).
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from pathlib import Path

from nmt.errors import NmtError

CHOICES = ("auto", "tcmalloc", "system")
# Debian's libtcmalloc-minimal4 (TCMalloc without its profilers), then gperftools' full build.
LIBRARIES = ("libtcmalloc_minimal.so.4", "libtcmalloc.so.4")
INSTALL = "Debian and Ubuntu: apt install libtcmalloc-minimal4"
# TCMalloc prints a line to stderr for every allocation over this many bytes (1 GiB by
# default), which a large model's host copies reach; nmt's stderr is for its own lines.
QUIET = ("TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD", str(2**62))


def library_dirs() -> list[Path]:
    """Where the dynamic loader finds system libraries, and this environment's own."""
    arch = sysconfig.get_config_var("MULTIARCH") or ""
    dirs = [Path(sys.prefix) / "lib"]
    for root in ("/usr/local/lib", "/usr/lib", "/lib"):
        dirs += [Path(root) / arch] if arch else []
        dirs.append(Path(root))
    return [*dirs, Path("/usr/lib64"), Path("/lib64")]


def find_tcmalloc(dirs: Iterable[Path]) -> Path | None:
    return next((d / name for d in dirs for name in LIBRARIES if (d / name).is_file()), None)


def names_an_allocator(preload: str) -> bool:
    return any("malloc" in Path(entry).name for entry in preload.replace(":", " ").split())


def restart_environment(
    environ: Mapping[str, str], platform: str, dirs: Iterable[Path]
) -> dict[str, str] | None:
    """The environment to start this process again in, or None to go on as it is."""
    want = environ.get("NMT_ALLOCATOR", "auto") or "auto"
    if want not in CHOICES:
        raise NmtError(f"NMT_ALLOCATOR={want}: not one of {', '.join(CHOICES)}")
    preload = environ.get("LD_PRELOAD", "")
    if want == "system" or allocator_named(preload) == "tcmalloc":  # started again already
        return None
    if names_an_allocator(preload):  # the user's own choice
        if want == "tcmalloc":
            raise NmtError(
                f"NMT_ALLOCATOR=tcmalloc: LD_PRELOAD names another allocator ({preload})"
            )
        return None
    linux = platform.startswith("linux")
    found = find_tcmalloc(dirs) if linux else None
    if found is None:
        if want == "tcmalloc":
            why = f"no {LIBRARIES[0]} found ({INSTALL})" if linux else "LD_PRELOAD is Linux's"
            raise NmtError(f"NMT_ALLOCATOR=tcmalloc: {why}")
        return None
    env = {**environ, "LD_PRELOAD": f"{found}:{preload}".rstrip(":")}
    env.setdefault(*QUIET)
    return env


def start_with_the_chosen_allocator() -> None:
    """Replace this process by itself under the chosen allocator (does not return
    then); called first by the ``nmt`` command, before anything is allocated."""
    env = restart_environment(os.environ, sys.platform, library_dirs())
    if env is not None and sys.executable:  # not an embedded interpreter
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def allocator_named(text: str) -> str:
    """The allocator a library path or a memory map names: tcmalloc, jemalloc, mimalloc,
    or system where it names none."""
    return next((name for name in ("tcmalloc", "jemalloc", "mimalloc") if name in text), "system")


def allocator_in_use() -> str:
    """The allocator mapped into this process."""
    try:
        return allocator_named(Path("/proc/self/maps").read_text())
    except OSError:  # no /proc: not Linux
        return "system"
