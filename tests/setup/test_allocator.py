"""nmt's processes run under TCMalloc where it is installed (nmt/setup/allocator.py):
the command starts itself again with the library preloaded, keeping its process id
and arguments; NMT_ALLOCATOR chooses, and a wrong value is one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from nmt.errors import NmtError
from nmt.setup.allocator import (
    LIBRARIES,
    QUIET,
    find_tcmalloc,
    library_dirs,
    restart_environment,
)
from tests.conftest import skip_or_fail, subprocess_env

# Prints its pid and allocator, then runs `nmt --version` through the entry point.
SHOW = (
    "import os, sys\n"
    "from nmt.setup.allocator import allocator_in_use\n"
    "print(os.getpid(), allocator_in_use(), flush=True)\n"
    "sys.argv = ['nmt', '--version', *sys.argv[1:]]\n"
    "from nmt.cli import main\n"
    "main()\n"
)


def installed() -> Path:
    """This machine's TCMalloc; without it skip, or fail under CI's NMT_REQUIRE_DATA=1
    (.ci/run installs Debian's libtcmalloc-minimal4)."""
    found = find_tcmalloc(library_dirs())
    if found is None:
        message = f"no {LIBRARIES[0]} here (.ci/run installs Debian's libtcmalloc-minimal4)"
        skip_or_fail(message)
    return found


def show(**env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in subprocess_env().items() if k not in ("LD_PRELOAD", "NMT_ALLOCATOR")}
    return subprocess.run(
        [sys.executable, "-c", SHOW], env={**base, **env}, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip


def test_the_command_starts_again_under_tcmalloc_as_the_same_process():
    installed()
    done = show()
    assert done.returncode == 0, done.stderr
    before, after, version = done.stdout.splitlines()
    assert before.split()[1] == "system" and after.split()[1] == "tcmalloc"
    assert before.split()[0] == after.split()[0]  # one process id: replaced, not a child
    assert version.startswith("nmt ") and done.stderr == ""


@pytest.mark.parametrize("env", [{"NMT_ALLOCATOR": "system"}, {"NMT_ALLOCATOR": "auto"}])
def test_system_keeps_the_process_as_it_is_and_auto_takes_tcmalloc(env):
    installed()
    done = show(**env)
    assert done.returncode == 0, done.stderr
    used = [line.split()[1] for line in done.stdout.splitlines()[:-1]]
    assert used == (["system"] if env["NMT_ALLOCATOR"] == "system" else ["system", "tcmalloc"])


def test_an_unknown_allocator_is_one_line_and_exit_2():
    done = show(NMT_ALLOCATOR="jemallocc")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "NMT_ALLOCATOR=jemallocc: not one of auto, tcmalloc, system" in lines[0]


def library(tmp_path: Path) -> Path:
    """A directory holding a file by TCMalloc's name: what the search looks for."""
    (tmp_path / LIBRARIES[0]).write_bytes(b"")
    return tmp_path


def test_the_preload_names_the_library_first_and_keeps_the_users(tmp_path):
    found, theirs = str(library(tmp_path) / LIBRARIES[0]), "/opt/lib/libfaketime.so"
    env = restart_environment({"LD_PRELOAD": theirs}, "linux", [tmp_path])
    assert env is not None and env["LD_PRELOAD"] == f"{found}:{theirs}"
    assert env[QUIET[0]] == QUIET[1]  # TCMalloc's lines about large allocations stay off stderr
    env = restart_environment({QUIET[0]: "1024"}, "linux", [tmp_path])
    assert env is not None and env[QUIET[0]] == "1024" and env["LD_PRELOAD"] == found


@pytest.mark.parametrize(
    "environ, platform",
    [
        ({"LD_PRELOAD": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"}, "linux"),  # the user's
        ({"LD_PRELOAD": "/x/libtcmalloc_minimal.so.4"}, "linux"),  # started again already
        ({"NMT_ALLOCATOR": "system"}, "linux"),
        ({}, "darwin"),  # no LD_PRELOAD there
    ],
)
def test_no_restart_where_an_allocator_is_chosen_or_cannot_be(tmp_path, environ, platform):
    assert restart_environment(environ, platform, [library(tmp_path)]) is None


def test_without_the_library_auto_goes_on_and_tcmalloc_says_how_to_install(tmp_path):
    assert restart_environment({}, "linux", [tmp_path]) is None
    wanted = r"NMT_ALLOCATOR=tcmalloc: no libtcmalloc_minimal\.so\.4 found \(Debian"
    with pytest.raises(NmtError, match=wanted):
        restart_environment({"NMT_ALLOCATOR": "tcmalloc"}, "linux", [tmp_path])
    with pytest.raises(NmtError, match="NMT_ALLOCATOR=tcmalloc: LD_PRELOAD is Linux's"):
        restart_environment({"NMT_ALLOCATOR": "tcmalloc"}, "darwin", [library(tmp_path)])


def test_tcmalloc_asked_for_beside_another_preloaded_allocator_is_refused(tmp_path):
    environ = {"NMT_ALLOCATOR": "tcmalloc", "LD_PRELOAD": "/opt/lib/libjemalloc.so.2"}
    with pytest.raises(NmtError, match="LD_PRELOAD names another allocator"):
        restart_environment(environ, "linux", [library(tmp_path)])


def test_the_allocator_in_use_is_read_from_the_process_not_from_ld_preload():
    """A preload the loader cannot find leaves the system's malloc in the process, and
    that is what a run records (``where.allocator``, read through allocator_in_use;
    the recorded value of study workers and DDP ranks: tests/setup/test_plugins.py)."""
    done = show(LD_PRELOAD="/nonexistent/libtcmalloc_minimal.so.4")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split()[1] == "system"
