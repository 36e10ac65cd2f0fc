"""Progress bars: the rate column reads well at every scale."""

from __future__ import annotations

import pytest
from rich.progress import Progress

from nmt.progress import RateColumn, info


@pytest.mark.parametrize(
    ("rate", "shown"), [(0.0, "0.0"), (1.26, "1.3"), (12.4, "12"), (7075.3, "7,075")]
)
def test_rates_below_ten_keep_a_decimal(rate, shown):
    """A CPU study's 1.3 updates/s is not '1', nor a fast run's 7,075 tokens/s '7075.3'."""
    bar = Progress()
    bar.add_task("x", rate=rate, unit="updates/s")
    assert str(RateColumn().render(bar.tasks[0])).split() == [shown, "updates/s"]


def test_a_long_message_off_a_terminal_is_one_line(capsys):
    """A log line is not wrapped at the console's width (grep finds it whole)."""
    message = "stopped at update 198 of train.max_steps 200: " + "word " * 40
    info(message)
    assert capsys.readouterr().err == message + "\n"
