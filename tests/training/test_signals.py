"""Stopping on SIGINT/SIGTERM: noted outside interruptible work, cutting it short inside."""

import os
import signal
import time

import pytest

from nmt.training.signals import StopSignals


def test_a_signal_cuts_interruptible_work_short_and_stops_later_work():
    previous = signal.getsignal(signal.SIGTERM)

    def decode_for_a_minute():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)
        return "done"

    start = time.perf_counter()
    with StopSignals() as signals:
        assert signals.interruptible(decode_for_a_minute) is None
        assert signals.received == signal.SIGTERM and signals.exit_code == 143
        assert signals.interruptible(lambda: "later") is None  # the signal came first
    assert time.perf_counter() - start < 30
    assert signal.getsignal(signal.SIGTERM) is previous


def test_work_runs_whole_without_a_signal_and_a_signal_between_is_only_noted():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    with StopSignals() as signals:
        assert signals.interruptible(lambda: 7) == 7
        os.kill(os.getpid(), signal.SIGINT)  # a training step: no exception, noted
        time.sleep(0.01)
        assert signals.received == signal.SIGINT and signals.exit_code == 130
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the one found
    signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("found", [signal.SIG_DFL, signal.default_int_handler, signal.SIG_IGN])
def test_the_handlers_found_are_put_back(found):
    previous = signal.signal(signal.SIGTERM, found), signal.signal(signal.SIGINT, found)
    with StopSignals():
        assert signal.getsignal(signal.SIGTERM) not in (found, signal.SIG_DFL)
    assert signal.getsignal(signal.SIGTERM) is found and signal.getsignal(signal.SIGINT) is found
    signal.signal(signal.SIGTERM, previous[0])
    signal.signal(signal.SIGINT, previous[1])


def test_a_background_job_keeps_ignoring_sigint_and_sigterm_still_stops_it():
    """A job started with ``&`` from a script (or under nohup) starts with SIGINT
    ignored: the terminal's Ctrl-C is not meant for it, so it stays ignored."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    with StopSignals() as signals:
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)
        assert signals.received is None
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)
        assert signals.received == signal.SIGTERM and signals.exit_code == 143
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    signal.signal(signal.SIGINT, previous)


ORPHAN = """
import signal, subprocess, sys, time
if sys.argv[1] == "parent":  # starts the child, says its pid, waits to be killed
    child = subprocess.Popen([sys.executable, "-c", sys.argv[2], "child", sys.argv[2]])
    print(child.pid, flush=True)
    time.sleep(120)
else:  # a rank blocked where its SIGTERM flag is never read
    from nmt.training import signals
    signals.ORPHAN_GRACE_SECONDS = 0.5
    signal.signal(signal.SIGTERM, lambda *args: None)
    signals.watch_parent()
    time.sleep(120)
"""


@pytest.mark.slow
def test_an_orphan_that_does_not_stop_on_its_sigterm_exits_after_the_grace():
    """A rank whose launcher is killed outright gets SIGTERM; one blocked where the
    flag is never read (a collective whose peer is gone) exits after the grace
    period instead of outliving its launcher."""
    import subprocess
    import sys

    parent = subprocess.Popen(
        [sys.executable, "-c", ORPHAN, "parent", ORPHAN], stdout=subprocess.PIPE, text=True
    )
    child = int(parent.stdout.readline())
    time.sleep(1.0)
    parent.kill()  # kill -9: it passes nothing on
    parent.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        with_zombie = open(f"/proc/{child}/stat").read().split()[2] == "Z"
        if with_zombie:
            return
        time.sleep(0.2)
    os.kill(child, signal.SIGKILL)
    pytest.fail("the orphan outlived its launcher")
