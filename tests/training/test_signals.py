"""Stopping on SIGINT/SIGTERM: noted outside interruptible work, cutting it short inside."""

import os
import signal
import time

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
    with StopSignals() as signals:
        assert signals.interruptible(lambda: 7) == 7
        os.kill(os.getpid(), signal.SIGINT)  # a training step: no exception, noted
        time.sleep(0.01)
        assert signals.received == signal.SIGINT and signals.exit_code == 130
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
