"""Stopping a run cleanly on SIGINT (Ctrl-C) or SIGTERM (a scheduler's kill).

A signal is noted and the loop stops after the current step, once ``last.pt`` is
saved; inside validation, which can decode for minutes on a large dev set, it cuts
the validation short at once instead.

A process that starts with SIGINT ignored (a job started with ``&`` from a
non-interactive shell, or ``nohup``) keeps ignoring it, as shells expect of
background jobs: Ctrl-C in the terminal is not meant for it. SIGTERM always
stops it cleanly.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

PARENT_POLL_SECONDS = 1.0  # how often a child looks for its parent (watch_parent)
# what an orphan gets after its SIGTERM to save last.pt and stop before it exits outright
# (a save takes seconds; a validation that SIGTERM cuts short, less)
ORPHAN_GRACE_SECONDS = 120.0


def watch_parent() -> None:
    """Send this process SIGTERM once the process that started it is gone (killed
    with ``kill -9``, which passes nothing on): a data-parallel rank then saves
    ``last.pt`` and stops instead of training on as an orphan, and one that has not
    stopped ``ORPHAN_GRACE_SECONDS`` later exits there and then. A daemon thread that
    polls the parent's pid; it needs no more of the platform than ``os.getppid``."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os.kill(os.getpid(), signal.SIGTERM)
        # a rank blocked where the SIGTERM flag is never read (a collective waiting for
        # a peer that is gone too) does not outlive its launcher for long
        time.sleep(ORPHAN_GRACE_SECONDS)
        os._exit(128 + signal.SIGTERM)

    threading.Thread(target=watch, daemon=True, name="watch-parent").start()


class Interrupted(Exception):
    """SIGINT/SIGTERM arrived; ``last.pt`` has been written. ``code`` is 130 or 143."""

    def __init__(self, code: int, message: str) -> None:
        self.code = code
        super().__init__(message)


class Terminated(BaseException):
    """SIGTERM arrived under :func:`terminable`. Like KeyboardInterrupt for SIGINT, it
    is no ``Exception``: code that catches every error lets it pass, and ``finally``
    blocks and atomic writers clean up on the way out."""


@contextlib.contextmanager
def terminable() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` for the length of the block; the previous
    handler is put back after it."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated


class _CutShort(Exception):
    """Raised by the handler inside :meth:`StopSignals.interruptible`, caught there."""


class StopSignals:
    """Catches SIGINT and SIGTERM for the length of a ``with`` block, then puts the
    previous handlers back; a SIGINT that was ignored stays ignored."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._interruptible = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        self._previous = {
            sig: signal.signal(sig, self._on_signal)
            for sig in (signal.SIGINT, signal.SIGTERM)
            if sig == signal.SIGTERM or signal.getsignal(sig) is not signal.SIG_IGN
        }
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.received = signum
        if self._interruptible:
            raise _CutShort

    @property
    def exit_code(self) -> int:
        """The shell's code for death by the signal received: 128 + its number."""
        return 130 if self.received == signal.SIGINT else 143

    def interruptible(self, work: Callable[[], T]) -> T | None:
        """``work()``, or None if a signal came before it or cut it short."""
        if self.received is not None:
            return None
        try:
            try:  # the handler may raise as late as this ``finally``: catch it outside
                self._interruptible = True
                return work()
            finally:
                self._interruptible = False
        except _CutShort:
            return None
