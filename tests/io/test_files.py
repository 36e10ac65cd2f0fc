"""Every file nmt writes goes through one atomic writer (nmt.io.files): a symlink is followed, a
device or FIFO is written in place (never replaced by a regular file), a signal
or a kill leaves no temp file for good, and nothing is half-written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from nmt.errors import NmtError
from nmt.io import files
from tests.conftest import as_in_a_terminal, require_extra, subprocess_env
from tests.test_cli import invoke


def dead_pid() -> int:
    """The pid of a process that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
@pytest.mark.parametrize("command", ["average", "attention"])
def test_an_output_through_a_symlink_replaces_its_target_and_keeps_the_link(
    tiny_run, tmp_path, command
):
    suffix = ".pt" if command == "average" else ".png"
    target, link = tmp_path / f"target{suffix}", tmp_path / f"link{suffix}"
    target.write_text("old")
    link.symlink_to(target)
    if command == "average":
        result = invoke("average", tiny_run / "best.pt", "-o", link)
    else:
        result = invoke("attention", tiny_run, "--src", "a b", "-o", link)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and target.read_bytes()[:2] in (b"PK", b"\x89P")


def test_an_output_that_is_a_fifo_is_written_into_not_replaced(tiny_run, tmp_path):
    """As root, ``-o /dev/null`` used to replace the system's /dev/null; a FIFO is
    the same kind of file without the risk."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    result = invoke("average", tiny_run / "best.pt", "-o", fifo)
    reader.join(timeout=30)
    assert result.exit_code == 0, result.output
    assert fifo.is_fifo() and received and received[0][:2] == b"PK"


def test_a_symlink_loop_is_one_line(tiny_run, tmp_path):
    loop = tmp_path / "loop.pt"
    loop.symlink_to(loop)
    result = invoke("average", tiny_run / "best.pt", "-o", loop)
    assert result.exit_code == 2 and "loop.pt: cannot write" in result.output


def test_temp_files_of_dead_writers_are_removed_and_live_ones_kept(tmp_path):
    dead = tmp_path / f".out.txt.{dead_pid()}.abc123.tmp"
    live = tmp_path / f".out.txt.{os.getpid()}.def456.tmp"
    other = tmp_path / f".other.txt.{dead_pid()}.abc123.tmp"
    for path in (dead, live, other):
        path.write_text("partial")
    files.write_text(tmp_path / "out.txt", "whole\n")
    assert (tmp_path / "out.txt").read_text() == "whole\n"
    assert not dead.exists() and live.exists() and other.exists()


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old\n")
    with pytest.raises(RuntimeError), files.atomic_file(path) as f:
        f.write(b"half")
        raise RuntimeError("killed mid-write")
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    with pytest.raises(NmtError, match="is a directory"):
        files.write_text(tmp_path, "x")


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_translate_leaves_no_output_and_no_temp_file(tiny_run, tmp_path, sig, code):
    source = tmp_path / "in.txt"
    source.write_text("lo nute miguge dabo\n" * 20_000)
    out = tmp_path / "out" / "hyp.txt"
    out.parent.mkdir()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nmt",
            "translate",
            str(tiny_run),
            "-i",
            str(source),
            "-o",
            str(out),
        ],
        env={**subprocess_env(), "NMT_QUIET": "1"},
        stderr=subprocess.PIPE,
        preexec_fn=as_in_a_terminal,
    )
    deadline = time.time() + 60
    while not list(out.parent.iterdir()) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read().decode()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code and b"Traceback" not in err, err.decode()[-2000:]
    assert list(out.parent.iterdir()) == []


def test_an_export_removes_what_a_killed_export_left(tiny_run, tmp_path):
    require_extra("ctranslate2", "ctranslate2")
    left = tmp_path / f".ct2.{dead_pid()}.tmp"
    left.mkdir()
    (left / "model.bin").write_bytes(b"half")
    assert invoke("export", tiny_run, "-o", tmp_path / "ct2").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ct2"]


@pytest.mark.parametrize("writer", ["atomic_file", "atomic_files"])
def test_a_signal_as_the_temp_file_is_made_leaves_no_temp_file(tmp_path, monkeypatch, writer):
    """SIGTERM can unwind a write between the temp file's creation and mkstemp's
    return (the suite once met it: a test waits for the temp to appear, then signals):
    the temp is still removed, and what is written stays as it was."""
    made = tempfile.mkstemp

    def interrupted(*args, **kwargs):
        fd, _ = made(*args, **kwargs)
        os.close(fd)
        raise KeyboardInterrupt

    (tmp_path / "out.txt").write_text("before\n")
    monkeypatch.setattr(tempfile, "mkstemp", interrupted)
    with pytest.raises(KeyboardInterrupt):
        if writer == "atomic_file":
            with files.atomic_file(tmp_path / "out.txt") as f:
                f.write(b"after\n")
        else:
            with files.atomic_files([tmp_path / "out.txt"]) as (f,):
                f.write(b"after\n")
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    assert (tmp_path / "out.txt").read_text() == "before\n"
