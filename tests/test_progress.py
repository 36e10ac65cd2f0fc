"""Progress bars: the rate column reads well at every scale; messages stay one line;
environment switches take the usual spellings of true and false; in a log, long work
says where it stands at most every so often and how it ended (LogLines), a
translation too."""

from __future__ import annotations

import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
from rich.progress import Progress

from nmt import progress
from nmt.progress import EtaColumn, LogLines, RateColumn, flag, info
from tests.conftest import subprocess_env


@pytest.mark.parametrize(
    ("rate", "shown"), [(0.0, "0.0"), (1.26, "1.3"), (12.4, "12"), (7075.3, "7,075")]
)
def test_rates_below_ten_keep_a_decimal(rate, shown):
    """A CPU study's 1.3 updates/s is not '1', nor a fast run's 7,075 tokens/s '7075.3'."""
    bar = Progress()
    bar.add_task("x", rate=rate, unit="updates/s")
    assert str(RateColumn().render(bar.tasks[0])).split() == [shown, "updates/s"]


def test_the_eta_column_shows_the_owners_eta_where_it_gives_one():
    """A study reckons its time left with its runs' testing (nmt.launch.watch), which
    its bar's fill cannot show; other bars keep rich's time remaining."""
    bar = Progress()
    bar.add_task("study", total=100, eta="0:12:00 + testing")
    bar.add_task("translate", total=100)
    assert [str(EtaColumn().render(t)) for t in bar.tasks] == ["0:12:00 + testing", "-:--:--"]


def test_a_long_message_off_a_terminal_is_one_line(capsys):
    """A log line is not wrapped at the console's width (grep finds it whole)."""
    message = "stopped at update 198 of train.max_steps 200: " + "word " * 40
    info(message)
    assert capsys.readouterr().err == message + "\n"


@pytest.mark.parametrize("value", ["1", "true", "True", "YES", "on", " yes "])
def test_true_spellings_switch_on(monkeypatch, value):
    monkeypatch.setenv("NMT_TEST_SWITCH", value)
    assert flag("NMT_TEST_SWITCH")


@pytest.mark.parametrize("value", ["0", "false", "No", "off", ""])
def test_false_spellings_and_unset_switch_off(monkeypatch, capsys, value):
    monkeypatch.setenv("NMT_TEST_SWITCH", value)
    assert not flag("NMT_TEST_SWITCH")
    monkeypatch.delenv("NMT_TEST_SWITCH")
    assert not flag("NMT_TEST_SWITCH")
    assert capsys.readouterr().err == ""


def test_another_value_is_off_with_a_warning_naming_it(monkeypatch, capsys):
    monkeypatch.setenv("NMT_TEST_SWITCH", "maybe")
    assert not flag("NMT_TEST_SWITCH")
    assert "NMT_TEST_SWITCH='maybe' is not a switch value" in capsys.readouterr().err


@pytest.mark.slow
def test_nmt_quiet_true_silences_a_command(tiny_run, tmp_path):
    env = {**subprocess_env(), "NMT_QUIET": "true"}
    cmd = [sys.executable, "-m", "nmt", "average", str(tiny_run / "best.pt")]
    out = subprocess.run([*cmd, "-o", str(tmp_path / "a.pt")], env=env, capture_output=True)
    assert out.returncode == 0 and out.stderr == b"" and out.stdout == b""


def test_a_line_at_most_every_interval_and_one_at_the_end(monkeypatch, capsys):
    now = [100.0]
    monkeypatch.setattr(progress, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    lines = LogLines("encoding train.src", "pair", 1_000, every=60.0)
    for done, at in [(100, 130.0), (200, 160.0), (300, 161.0), (400, 200.0)]:
        now[0] = at
        lines.update(done)
    now[0] = 250.0
    lines.end(1_000)
    out = capsys.readouterr().err.splitlines()
    assert out == [
        "encoding train.src: 200/1,000 pairs, 3.3 pairs/s, elapsed 0:01:00, ETA 0:04:00",
        "encoding train.src: 1,000 pairs in 0:02:30 (6.7 pairs/s)",
    ]


def test_an_unknown_total_has_no_eta(monkeypatch, capsys):
    now = [0.0]
    monkeypatch.setattr(progress, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    lines = LogLines("study", "run", None, every=1.0)
    now[0] = 2.0
    lines.update(3)
    assert re.fullmatch(
        r"study: 3/\? runs, 1\.5 runs/s, elapsed 0:00:02, ETA \?\n", capsys.readouterr().err
    )


def test_a_translation_in_a_log_says_where_it_stands_each_minute(monkeypatch, capsys):
    """``sentence_progress`` (translate, evaluate, import): in a log, a line as it
    starts, one a minute at most with the rate and an ETA, and one as it ends."""
    now = [0.0]
    monkeypatch.setattr(progress, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    with progress.sentence_progress("translate", 1_000, show=True) as tally:
        for at in (30.0, 61.0, 90.0, 110.0):
            now[0] = at
            tally.done(250)  # no work planned (an import): the ETA counts sentences
        now[0] = 125.0
    assert capsys.readouterr().err.splitlines() == [
        "translate: 1,000 sentences",
        "translate: 500/1,000 sentences, 8.2 sent/s, elapsed 0:01:01, ETA 0:01:01",
        "translate: 1,000 sentences in 0:02:05 (8.0 sent/s)",
    ]
    now[0] = 0.0
    with progress.sentence_progress("translate", 1, show=True) as tally:  # one: no plural
        now[0] = 2.0
        tally.done(1)
    assert capsys.readouterr().err.splitlines() == [
        "translate: 1 sentence",
        "translate: 1 sentence in 0:00:02 (0.5 sent/s)",
    ]


def test_a_translations_eta_follows_its_work_not_its_sentences(monkeypatch, capsys):
    """Translation goes from the shortest sentences to the longest: half the sentences
    done in 61 s may be a sixth of the work (500 of 4 source pieces and 500 of 20),
    and then 305 s are left, not 61. Work not planned yet (the next part of a long
    input) counts at the work per sentence planned so far."""
    now = [0.0]
    monkeypatch.setattr(progress, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    with progress.sentence_progress("translate", 1_000, show=True) as tally:
        tally.planned(1_000, 12_000)
        now[0] = 61.0
        tally.done(500, 2_000)
        now[0] = 200.0
    now[0] = 0.0
    with progress.sentence_progress("translate", 1_000, show=True) as tally:
        tally.planned(500, 5_000)  # the first part of two: the second counts as long
        now[0] = 61.0
        tally.done(250, 2_500)
    lines = [x for x in capsys.readouterr().err.splitlines() if "ETA" in x]
    assert [x.split("ETA ")[1] for x in lines] == ["0:05:05", "0:03:03"]
