"""Where a run stands: its state (saved in every checkpoint), its budget, and the
statistics of the interval the next log line reports."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path

from nmt.io.files import is_number
from nmt.progress import clock
from nmt.setup.training import TrainConfig


@dataclass
class RunState:
    """Where training stands; saved in every checkpoint so a resume continues exactly."""

    step: int = 0
    epoch: int = 0  # 0-based index of the current epoch
    batch_in_epoch: int = 0  # batches of the current epoch already consumed
    elapsed: float = 0.0  # wall-clock seconds, summed over resumes
    tokens: int = 0  # target tokens trained on
    best: float | None = None
    best_step: int = 0
    bad_evals: int = 0
    # the step of the last validation that finished (best.pt, early stopping and the
    # log are up to date with it); None in checkpoints from before it was kept, whose
    # runs validated at their step
    validated: int | None = None

    def improved(self, metrics: dict[str, float], early_stopping: str) -> bool:
        """Note a validation: whether it is the best so far by ``train.early_stopping``
        (dev BLEU, or else dev loss), and how many in a row were not."""
        key = "valid_bleu" if early_stopping == "bleu" else "valid_loss"
        value = metrics[key] if key == "valid_bleu" else -metrics[key]
        if not math.isfinite(value) or not math.isfinite(metrics.get("valid_loss", 0.0)):
            self.bad_evals += 1  # a NaN or infinite loss is never the best
            return False
        if self.best is None or value > self.best:
            self.best, self.best_step, self.bad_evals = value, self.step, 0
            return True
        self.bad_evals += 1
        return False


def budget_spent(t: TrainConfig, s: RunState) -> bool:
    """Whether any of ``train.max_steps``, ``max_epochs`` or ``max_minutes`` is spent."""
    return spent_budget(t, s) is not None


def spent_budget(t: TrainConfig, s: RunState) -> str | None:
    """The key of the first budget that is spent (``train.max_steps``,
    ``train.max_epochs``, ``train.max_minutes``), None while none is."""
    if t.max_steps is not None and s.step >= t.max_steps:
        return "train.max_steps"
    if t.max_epochs is not None and s.epoch >= t.max_epochs:
        return "train.max_epochs"
    if t.max_minutes is not None and s.elapsed >= 60 * t.max_minutes:
        return "train.max_minutes"
    return None


def stop_message(t: TrainConfig, s: RunState, reason: str) -> str | None:
    """A line naming what ended a run before the ``train.max_steps`` it asked for
    (another budget, or early stopping); None when it reached them."""
    if t.max_steps is None or s.step >= t.max_steps:
        return None
    why = reason
    if reason == "train.max_epochs":
        why = f"train.max_epochs ({t.max_epochs}) is spent"
    elif reason == "train.max_minutes":
        why = (
            f"train.max_minutes ({t.max_minutes:g}) is spent, "
            f"{clock(s.elapsed)} of training and validation"
        )
    elif reason == "early stopping":
        better = "BLEU" if t.early_stopping == "bleu" else "loss"
        why = f"early stopping: train.patience ({t.patience}) validations without a better dev "
        why += better
    return f"stopped at update {s.step:,} of train.max_steps {t.max_steps:,}: {why}"


def accumulation(t: TrainConfig, step: int) -> int:
    """The batches of update ``step`` + 1 (``train.accumulate``, or the last
    ``train.accumulate_schedule`` entry that has begun by then)."""
    begun = [batches for update, batches in t.accumulate_schedule if update <= step]
    return begun[-1] if begun else t.accumulate


def batches_for(t: TrainConfig, steps: int) -> int:
    """The batches (per rank) of the first ``steps`` updates under the schedule: the
    work done, which an ETA counts, since a larger update takes longer."""
    bounds = [0, *(update for update, _ in t.accumulate_schedule if update < steps), steps]
    return sum((b - a) * accumulation(t, a) for a, b in itertools.pairwise(bounds))


def updates_for(t: TrainConfig, batches: int, world: int) -> int:
    """How many updates take ``batches`` batches (over all ranks) under the schedule."""
    step = 0
    for end in [*(update for update, _ in t.accumulate_schedule), math.inf]:
        per_update = accumulation(t, step) * world
        needed = math.ceil(batches / per_update)
        if step + needed <= end:
            return step + needed
        batches -= (end - step) * per_update
        step = end
    raise AssertionError("unreachable: the last stretch never ends")


def expected_steps(t: TrainConfig, s: RunState, batches_per_epoch: int, world: int) -> int | None:
    """Where training will stop, in steps, for the progress bar's ETA; a time budget
    is turned into steps at the pace so far. None while nothing bounds it yet."""
    bounds = [t.max_steps] if t.max_steps else []
    if t.max_epochs:
        bounds.append(updates_for(t, t.max_epochs * batches_per_epoch, world))
    if t.max_minutes and s.step:
        seconds_left = max(60 * t.max_minutes - s.elapsed, 0.0)
        bounds.append(s.step + int(seconds_left / (s.elapsed / s.step)))
    return min(bounds) if bounds else None


class IntervalStats:
    """Training loss and statistics averaged since the last log line; the rate is
    over the training steps' own time, so a validation in the interval does not
    lower it."""

    def __init__(self) -> None:
        self.tokens = self.count = 0
        self.loss = self.seconds = 0.0
        self.sums: dict[str, float] = {}

    def add(self, loss: float, stats: dict[str, float], tokens: int, seconds: float) -> None:
        self.count += 1
        self.tokens += tokens
        self.loss += loss
        self.seconds += seconds
        for k, v in stats.items():
            self.sums[k] = self.sums.get(k, 0.0) + v

    def rate(self) -> float:
        """Target tokens per second of training step."""
        return self.tokens / max(self.seconds, 1e-9)

    def record(self) -> dict[str, float]:
        means = {k: v / self.count for k, v in self.sums.items()}
        return {"loss": self.loss / self.count, "tokens_per_s": self.rate(), **means}


# Statistics worth a glance in the progress bar, and how to label them.
SHOWN = {"ss_gold_prob": "ε", "ss_replaced": "replaced", "attn_entropy": "H(α)"}


def progress_info(record: dict[str, float]) -> str:
    shown = [f"{label} {record[k]:.2f}" for k, label in SHOWN.items() if k in record]
    return "  ".join([f"loss {record['loss']:.3f}", *shown])


def peak_rss_mb() -> float:
    """This process's peak resident memory (MB); NaN where the platform keeps none
    that Python can read (the ``resource`` module is POSIX's)."""
    try:
        import resource
    except ImportError:
        return math.nan
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# The figures of a metrics.jsonl record that are read back, each a number.
FIGURES = ("step", "elapsed", "valid_bleu", "valid_loss", "tokens_per_s")


def metric_records(path: Path) -> list[dict[str, float]]:
    """The records of a run's ``metrics.jsonl`` whose figures are numbers; a line cut
    by a kill, or otherwise damaged, is left out (:func:`read_metrics` says which)."""
    return read_metrics(path)[0]


def read_metrics(path: Path) -> tuple[list[dict[str, float]], list[int]]:
    """A run's ``metrics.jsonl``: the records whose figures are numbers, and the
    numbers (from 1) of the lines left out as damaged."""
    if not path.is_file():
        return [], []
    records, damaged = [], []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            record = None
        if isinstance(record, dict) and all(is_number(record[k]) for k in FIGURES if k in record):
            records.append(record)
        else:
            damaged.append(number)
    return records, damaged
