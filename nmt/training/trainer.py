"""The training loop: budgets, validation, early stopping, checkpoints and resume.

A :class:`Trainer` gets a built model and its data (``nmt.training.build``) and
reads top to bottom: ``loss`` -> ``train_step`` -> ``validate`` -> ``run``. What
one batch's loss is belongs to the recipe's training regime, an objective
(``nmt.training.objective``) built once; the trainer runs updates, logging,
validation and checkpoints whatever the regime. Beside it: the run's state and
budget (``state``), each epoch's batches (``epochs``), the dev scores
(``validation``) and stopping on a signal (``signals``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel

from nmt import kernels
from nmt.data.batching import Batch
from nmt.decoding.search import Listener
from nmt.errors import NmtError
from nmt.export.averaging import kept_name, prune
from nmt.io import checkpoint, files
from nmt.model.seq2seq import Transformer
from nmt.progress import Tally, clock, console, eta, log_line, progress_bar
from nmt.setup.config import from_dict
from nmt.setup.device import bf16_units, load_average, where_it_ran
from nmt.setup.training import TRAINERS
from nmt.training.build import TrainingData
from nmt.training.curriculum import competence
from nmt.training.distributed import Distributed
from nmt.training.ema import WeightAverage
from nmt.training.epochs import EpochPlans
from nmt.training.lr_schedule import SCHEDULES
from nmt.training.objective import Loss
from nmt.training.optimizers import optimizers
from nmt.training.signals import Interrupted, StopSignals
from nmt.training.state import (
    IntervalStats,
    RunState,
    accumulation,
    batches_for,
    budget_spent,
    expected_steps,
    metric_records,
    peak_rss_mb,
    progress_info,
    spent_budget,
    stop_message,
)
from nmt.training.tensorboard import dev_attention
from nmt.training.trackers import Tracker
from nmt.training.tracking import open_trackers
from nmt.training.validation import dev_scores

if TYPE_CHECKING:
    from rich.progress import Progress

    from nmt.setup.recipe import RunConfig

# said on the start line when bf16 is asked for on a CPU without bf16 instructions
SOFTWARE_BF16 = (
    "; this CPU has no bf16 instructions (avx512_bf16, amx_bf16 or Arm's bf16): its bf16 "
    "products are emulated, and train.precision=fp32 suits it"
)


def out_of_memory(e: RuntimeError) -> bool:
    """Whether an error is a failed allocation (CUDA's OutOfMemoryError or the CPU
    allocator's RuntimeError)."""
    return isinstance(e, torch.OutOfMemoryError) or "can't allocate memory" in str(e)


class Trainer:
    """Updates with the recipe's optimiser (Adam, or Muon with Adam: nmt.training.
    optimizers) under its learning-rate schedule on its objective (``train.trainer``),
    with validation, early stopping, checkpoints and resume."""

    def __init__(
        self,
        model: Transformer,
        data: TrainingData,
        cfg: RunConfig,
        device: torch.device = torch.device("cpu"),
        dist: Distributed = Distributed(),
        log: Callable[..., None] = console.print,
    ) -> None:
        self.cfg = cfg
        self.data = data
        self.device = device
        self.dist = dist
        self.log = log if dist.main else lambda *args, **kwargs: None
        self.run_dir = Path(cfg.run_dir)
        self.state = RunState()
        self.step_tokens = 0  # target tokens of the last update, over all ranks
        self.step_seconds = 0.0  # time inside train_step, for per-step cost figures
        self.signals = StopSignals()
        self.epochs = EpochPlans(data, cfg, dist.world)
        self.saved_step: int | None = None  # of the last full checkpoint
        self.last_valid_loss: float | None = None  # the last validation's dev loss
        self.trackers: list[Tracker] = []  # train.log_to's, open while run() runs
        self.load_at_start = load_average()  # what else ran as this began
        self.model = model.to(device)
        t = cfg.train
        if t.kernels == "auto":  # faster CPU modules, same function (nmt.kernels)
            kernels.install(self.model)
        if t.compile:
            # The teacher-forced pass that training runs (Transformer.states), as an
            # instance attribute, so that parameter names and checkpoints are
            # unchanged; shapes vary from batch to batch, hence dynamic. Scheduled
            # sampling's second pass and incremental decoding call other methods.
            self.model.states = torch.compile(self.model.states, dynamic=True)
        self.optimizer = optimizers(self.model, t)
        # what validation scores and checkpoints hold: the weights, or their average
        self.ema = WeightAverage(self.model, t.ema, t.ema_start) if t.ema is not None else None
        self.objective = TRAINERS.get(t.trainer.kind)(self.model, cfg)
        self.ddp = self._data_parallel() if dist.enabled else None

    def _data_parallel(self) -> DistributedDataParallel:
        """The objective under DDP: every pass of an update synchronised once."""
        # Each rank drops out differently; parameters stay identical (DDP syncs them).
        torch.manual_seed(self.cfg.train.seed * 1000 + self.dist.rank)
        index = self.device.index
        # A plug-in's module may leave parameters of its base class unused (a variant
        # that projects no queries): DDP must then look for them after every backward
        return DistributedDataParallel(
            self.objective,
            device_ids=[index] if index is not None else None,
            find_unused_parameters=bool(self.cfg.plugins),
        )

    def describe(self) -> str:
        """One line on what is about to train; batches over ``train.batch_tokens`` (a
        pair longer than the budget trains alone) are counted, not hidden."""
        t = self.cfg.train
        plan = self.epochs.plan(self.state.epoch)
        params = sum(p.numel() for p in self.model.parameters())
        sizes = self.epochs.pairs.lengths.max(1)  # what the budget counts
        over = sum(1 for b in plan if sizes[b].max() > t.batch_tokens)
        return (
            f"{len(self.epochs.pairs)} training pairs in {len(plan)} batches of <= "
            f"{t.batch_tokens} tokens"
            + (f" ({over} of them a single pair longer than that)" if over else "")
            + f"; padding {self.epochs.pairs.padding_fraction(plan):.1%}; "
            f"{params / 1e6:.2f}M parameters; device {self.device}"
            + (" (bf16 autocast)" if self.bf16 else "")
            + (SOFTWARE_BF16 if self.software_bf16 else "")
        )

    @property
    def software_bf16(self) -> bool:
        """bf16 autocast on a CPU that reports no bf16 instructions."""
        return self.bf16 and self.device.type == "cpu" and bf16_units() is False

    def restore(self, ckpt: dict[str, Any]) -> None:
        """Continue from a full checkpoint: parameters (and their average), optimiser,
        run state, RNG."""
        if self.ema is None:
            self.model.load_state_dict(ckpt["model"])
        else:
            self.model.load_state_dict(ckpt["training_weights"])
            self.ema.load(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.state = from_dict(RunState, ckpt["state"])
        self.saved_step = self.state.step
        rng = ckpt["rng"][self.dist.rank % len(ckpt["rng"])]  # one state per rank
        torch.set_rng_state(rng["torch"])
        if self.device.type == "cuda" and rng.get("cuda") is not None:
            torch.cuda.set_rng_state(rng["cuda"])
        self._trim_metrics()
        self.log(f"resumed at step {self.state.step} (epoch {self.state.epoch + 1})")

    def _trim_metrics(self) -> None:
        """Keep the complete records up to the resumed step: a killed run may have
        logged past its last checkpoint, or died in the middle of a line."""
        path = self.run_dir / "metrics.jsonl"
        if not path.is_file():
            return
        kept = [r for r in metric_records(path) if r.get("step", 0) <= self.state.step]
        files.write_text(path, "".join(json.dumps(r) + "\n" for r in kept))

    # ------------------------------------------------------------------- loss

    def loss(self, batch: Batch) -> Loss:
        """The objective of one batch at the current update (no DDP)."""
        return self.objective(batch, self.state.step)

    # ------------------------------------------------------------------- step

    @property
    def bf16(self) -> bool:
        """Whether the matmuls run under bf16 autocast (``train.precision``)."""
        precision = self.cfg.train.precision
        return precision == "bf16" or (precision == "auto" and self.device.type == "cuda")

    def _autocast(self) -> Any:
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16)

    def train_step(self, batches: list[Batch]) -> tuple[float, dict[str, float]] | None:
        """One update over ``batches`` (gradient accumulation); None if it was skipped
        because the loss or gradient was not finite."""
        self.model.train()
        # Normalise by the tokens of the whole update, over all ranks.
        (tokens,) = self.dist.sum([sum(b.tgt_tokens for b in batches)])
        self.step_tokens = int(tokens)
        objective, total, stats = self._backward(batches, tokens)
        t = self.cfg.train
        norm = (
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), t.clip_norm)
            if t.clip_norm > 0
            else torch.zeros(())
        )
        step = self.state.step + 1

        def at_step(peak: float) -> float:
            return SCHEDULES[t.lr_schedule](step, peak, t.warmup, t.max_steps)

        lr = at_step(t.lr)
        if not (math.isfinite(objective) and bool(torch.isfinite(norm))):
            self.optimizer.zero_grad(set_to_none=True)
            return None
        self.optimizer.set_lr(at_step)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.ema is not None:
            self.ema.update(step)
        return total / tokens, {**stats, "lr": lr}

    def _check_weights(self) -> None:
        """Stop once an update has left a weight non-finite (from finite gradients: a
        learning rate far too large), before anything saves it; checked where it costs
        nothing a step: before a save, and when a loss turns non-finite."""
        params = [p for p in self.model.parameters() if p.is_floating_point()]
        if bool(torch.nn.utils.get_total_norm(params).isfinite()):
            return
        lr = self.optimizer.param_groups[0]["lr"]
        raise NmtError(
            f"by update {self.state.step} the weights are non-finite (train.lr {lr:g} at the "
            "last update); lower train.lr (nothing was saved from them: the last checkpoint, "
            "if any, is from before)"
        )

    def _backward(self, batches: list[Batch], tokens: float) -> tuple[float, float, dict]:
        """The gradient of the update's objective per target token (DDP averages it over
        ranks, hence the factor world), synchronised once, after the last batch; the
        summed objective and token loss over all ranks, and the last batch's figures."""
        d, forward = self.dist, self.ddp if self.ddp is not None else self.objective
        objective, total, stats = 0.0, 0.0, {}
        for i, batch in enumerate(batches):
            last = i == len(batches) - 1
            sync = self.ddp.no_sync() if self.ddp is not None and not last else nullcontext()
            with sync:
                with self._autocast():
                    loss = forward(batch.to(self.device), self.state.step)
                (loss.total * (d.world / tokens)).backward()
            objective += float(loss.total.detach())
            total += loss.token_loss
            stats = loss.stats
        objective, total = d.sum([objective, total])
        return objective, total, stats

    # ------------------------------------------------------------- validation

    def validate(self, progress: Listener | None = None) -> dict[str, float]:
        """The dev set's scores for the model as it stands, or for its weights'
        average under ``train.ema`` (nmt.training.validation)."""
        with self.averaged():
            return dev_scores(self.model, self.data, self.cfg, self.device, self.bf16, progress)

    def averaged(self) -> Any:
        """The model holds the weights that validation scores and checkpoints keep
        inside: the average under ``train.ema``, else the trained weights."""
        return self.ema.applied() if self.ema is not None else nullcontext()

    # ------------------------------------------------------------ checkpoints

    def checkpoint_payload(self, full: bool) -> dict[str, Any]:
        trained = self.model.state_dict()
        payload: dict[str, Any] = {
            "config": self.cfg.to_dict(),
            "model": self.ema.state_dict(trained) if self.ema is not None else trained,
            "state": dataclasses.asdict(self.state),
            "vocab": {
                "src": self.data.vocabs.src.model,
                "tgt": self.data.vocabs.tgt.model,
                "joint": self.data.vocabs.joint,
            },
        }
        if full:
            if self.ema is not None:  # what a resume continues to train
                payload["training_weights"] = trained
            payload["optimizer"] = self.optimizer.state_dict()
            rng = {
                "torch": torch.get_rng_state(),
                "cuda": torch.cuda.get_rng_state(self.device)
                if self.device.type == "cuda"
                else None,
            }
            payload["rng"] = self.dist.gather(rng)  # one state per rank
        return payload

    def save(self, name: str, full: bool = True) -> None:
        """Every rank calls this (RNG states are gathered); rank 0 writes."""
        self._check_weights()
        payload = self.checkpoint_payload(full)
        if self.dist.main:
            checkpoint.save(self.run_dir / name, payload)
        if full:
            self.saved_step = self.state.step

    def write_metrics(self, record: dict[str, Any]) -> None:
        if not self.dist.main:
            return
        files.append_line(self.run_dir / "metrics.jsonl", json.dumps(record))
        for tracker in self.trackers:
            tracker.record(record)

    # ------------------------------------------------------------------- loop

    def run(self) -> dict[str, Any]:
        """Train until the budget is spent or early stopping; returns a summary, with
        the trackers that failed on the way (``tracker_failures``: name -> why)."""
        finished = False
        try:
            if self.dist.main:  # one at a time, so that those open are closed on a failure
                for tracker in open_trackers(self.cfg, self.state.step):
                    self.trackers.append(tracker)
            with self.signals:
                summary = self._loop()
            finished = True
        finally:
            for tracker in self.trackers:
                tracker.close(finished)
            failures = {t.name: t.failed for t in self.trackers if t.failed is not None}
            self.trackers = []
        return summary | ({"tracker_failures": failures} if failures else {})

    def budget_spent(self) -> bool:
        """Whether any budget is spent (on any rank: clocks differ between ranks)."""
        return self.dist.any(budget_spent(self.cfg.train, self.state))

    def _loop(self) -> dict[str, Any]:
        t, s = self.cfg.train, self.state
        plan = self.epochs.plan(s.epoch)
        bar, task = self._training_bar(plan)
        interval, bad_steps = IntervalStats(), 0
        if s.validated is None:  # a fresh run, or a checkpoint from before it was kept
            s.validated = s.step
        stop_reason: str | None = None  # early stopping, or the key of the budget spent
        with bar:
            # A stop that cut a due validation short: it runs first, as it would have
            if s.validated != s.step and s.step % t.valid_every == 0:
                if self._validate_and_save(bar):
                    return self._summary("early stopping")
                self._stop_if_signalled()
            while not self.budget_spent():
                start = time.perf_counter()
                nxt = self._next_group(plan)
                if nxt is None:  # a new epoch, and the epoch budget is spent
                    stop_reason = "train.max_epochs"
                    break
                plan, group = nxt
                bad_steps = self._update(plan, group, bad_steps, interval, start)
                if interval.count:  # the bar shows the rate of the interval so far
                    bar.update(task, rate=interval.rate())
                if s.step % t.log_every == 0 and interval.count:
                    self._log_interval(interval, plan, bar, task)
                    interval = IntervalStats()
                bar.update(task, completed=s.step)
                if s.step % t.valid_every == 0 and self._validate_and_save(bar):
                    stop_reason = "early stopping"
                    break
                if t.save_every and s.step % t.save_every == 0 and self.saved_step != s.step:
                    self.save("last.pt")
                self._stop_if_signalled()
            # The last update is validated, also when a stop cut its validation short
            # (a resume then finds the budget spent, and validates here)
            if s.validated != s.step:
                self._validate_and_save(bar)
                self._stop_if_signalled()
        if self.dist.any(self.dist.main and s.best is None and bool(s.validated)):
            raise NmtError(
                f"by update {s.step} no validation gave a finite dev loss (the last: "
                f"{self.last_valid_loss}): there is no model worth keeping, so best.pt was not "
                "written; check the recipe's values (train.lr, the positions' ratio) and the "
                "skipped updates in the log"
            )
        # a rank whose own clock is short of train.max_minutes stopped on another's
        return self._summary(stop_reason or spent_budget(t, s) or "train.max_minutes")

    def _training_bar(self, plan: list) -> tuple[Progress, Any]:
        t, s, d = self.cfg.train, self.state, self.dist
        bar = progress_bar(disable=not d.main)
        task = bar.add_task(
            "train",
            total=expected_steps(t, s, len(plan), d.world),
            completed=s.step,
            rate=0.0,
            unit="tok/s",
            info="",
        )
        return bar, task

    def _next_group(self, plan: list) -> tuple[list, np.ndarray] | None:
        """The epoch's plan the next update takes its batches from, and their
        positions in it: a new epoch's when this one has none left (None if that
        spends the epoch budget)."""
        t, s = self.cfg.train, self.state
        count = accumulation(t, s.step) * self.dist.world
        while not len(group := self.epochs.group(s.batch_in_epoch, count, s.step)):
            s.epoch, s.batch_in_epoch = s.epoch + 1, 0
            if self.budget_spent():
                return None
            plan = self.epochs.plan(s.epoch)
        return plan, group

    def _update(
        self, plan: list, group: np.ndarray, bad_steps: int, interval: IntervalStats, start: float
    ) -> int:
        """One update on this rank's share of the plan's batches at ``group``, counted
        in the run's state and ``interval``; returns the non-finite updates in a row."""
        d, s = self.dist, self.state
        s.batch_in_epoch = int(group[-1]) + 1
        batches = [self.epochs.pairs.collate(plan[i]) for i in group[d.rank :: d.world]]
        try:
            result = self.train_step(batches)
        except RuntimeError as e:
            if not out_of_memory(e):
                raise
            self._out_of_memory(batches)
        seconds = time.perf_counter() - start
        self.step_seconds += seconds
        s.step += 1
        if result is None:
            bad_steps = self._skipped(bad_steps + 1)
        else:
            bad_steps = 0
            s.tokens += self.step_tokens
            interval.add(*result, self.step_tokens, seconds)
        s.elapsed += time.perf_counter() - start
        return bad_steps

    def _log_interval(self, interval: IntervalStats, plan: list, bar: Progress, task: Any) -> None:
        """The training figures of the steps since the last log, to the log and bar."""
        t, s = self.cfg.train, self.state
        record = interval.record()
        expected = expected_steps(t, s, len(plan), self.dist.world)
        self.write_metrics(
            {
                "step": s.step,
                "epoch": s.epoch + 1,
                "elapsed": s.elapsed,
                **record,
                **({"expected_steps": expected} if expected else {}),
                **({"competence": competence(c, s.step)} if (c := t.length_curriculum) else {}),
            }
        )
        bar.update(task, total=expected, info=progress_info(record))
        if self.dist.main:  # the ETA counts batches: a larger update takes longer
            work = batches_for(t, expected) if expected else None
            log_line(
                f"step {s.step:,}/{expected or '?'}  {progress_info(record)}  "
                f"{record['tokens_per_s']:,.0f} tok/s  lr {record['lr']:.3g}  "
                f"elapsed {clock(s.elapsed)}  ETA {eta(batches_for(t, s.step), work, s.elapsed)}"
            )

    def _summary(self, stop_reason: str) -> dict[str, Any]:
        """What the run did, and what ended it (a budget's key, or early stopping:
        named in a line of its own when the run ends before its train.max_steps)."""
        s, resampling = self.state, self.epochs.resample_seconds
        if (message := stop_message(self.cfg.train, s, stop_reason)) is not None:
            self.log(message)
        return {
            "steps": s.step,
            "epochs": s.epoch + (s.batch_in_epoch > 0),
            "elapsed_s": s.elapsed,
            "stop": stop_reason,
            "best_step": s.best_step,
            "tokens_per_s": s.tokens / max(s.elapsed, 1e-9),
            "peak_rss_mb": peak_rss_mb(),
            "where": {**where_it_ran(self.device), "load_at_start": self.load_at_start},
            **({"subword_sampling_s": resampling} if resampling else {}),
            **self._objective_summary(),
        }

    def _objective_summary(self) -> dict[str, Any]:
        """The objective's own figures for the summary, each also logged once."""
        figures = self.objective.summary(self.step_seconds)
        for key, value in figures.items():
            self.log(f"{key.replace('_', ' ')}: {value:.2f}")
        return figures

    def _out_of_memory(self, batches: list[Batch]) -> None:
        """A failed allocation in a step: one line naming what to lower and how to go on."""
        tokens = sum(b.tgt_tokens for b in batches)
        then = (
            f"then continue with --resume (last.pt is at step {self.saved_step})"
            if self.saved_step is not None
            else "then start again (no checkpoint was written yet)"
        )
        raise NmtError(
            f"out of memory at step {self.state.step + 1} ({tokens} target tokens on this "
            f"rank); lower train.batch_tokens (or the model sizes), {then}"
        )

    def _stop_if_signalled(self) -> None:
        """After SIGINT/SIGTERM (on any rank): save ``last.pt`` (unless validation just
        did) and raise Interrupted."""
        if self.dist.any(self.signals.received is not None):
            if self.saved_step != self.state.step:
                self.save("last.pt")
            raise Interrupted(
                self.signals.exit_code,
                f"interrupted at step {self.state.step}; last.pt saved. "
                f"Continue with: nmt train RECIPE --resume",
            )

    def _skipped(self, bad_steps: int) -> int:
        """Log a skipped update; stop the run after ``max_bad_steps`` in a row, or at
        once when the weights themselves are what is no longer finite."""
        self._check_weights()
        step = self.state.step
        self.log(f"step {step}: non-finite loss or gradient, update skipped")
        self.write_metrics({"step": step, "skipped": "non-finite"})
        if bad_steps >= self.cfg.train.max_bad_steps:
            raise NmtError(
                f"stopped at step {step}: {bad_steps} consecutive non-finite losses; lower "
                f"train.lr or check the data (last good checkpoint: {self.run_dir / 'last.pt'})"
            )
        return bad_steps

    def _validate_and_save(self, bar: Progress) -> bool:
        """Validate (rank 0), save best/last; True if early stopping says stop."""
        improved = stop = False
        metrics = None
        start = time.perf_counter()
        if self.dist.main and (metrics := self._interruptible_validate(bar)) is not None:
            s = self.state
            improved = s.improved(metrics, self.cfg.train.early_stopping)
            self.last_valid_loss = metrics["valid_loss"]
            seconds = time.perf_counter() - start  # apart, so that training time is known
            s.elapsed += seconds
            self.write_metrics(
                {"step": s.step, "epoch": s.epoch + 1, "elapsed": s.elapsed, **metrics}
                | {"valid_seconds": seconds}
            )
            drawing = [t for t in self.trackers if t.draws_attention]
            if drawing and self.data.dev_src:
                src, ref = self.data.dev_src[0], self.data.dev_refs[0]
                with self.averaged():
                    amap = dev_attention(self.model, self.data.vocabs, src, ref)
                for tracker in drawing:
                    tracker.attention(amap, s.step)
            shown = "  ".join(f"{k.removeprefix('valid_')} {v:.3f}" for k, v in metrics.items())
            bar.console.print(f"step {s.step:>6}  valid  {shown}{'  *best*' if improved else ''}")
            patience = self.cfg.train.patience
            stop = patience is not None and s.bad_evals >= patience
        improved, stop = self.dist.any(improved), self.dist.any(stop)
        if self.dist.any(self.dist.main and metrics is not None):
            self.state.validated = self.state.step  # kept in last.pt: this one is not owed
        if improved:
            self.save("best.pt", full=False)
        if keep := self.cfg.train.keep_checkpoints:
            self.save(kept_name(self.state.step), full=False)
            if self.dist.main:
                prune(self.run_dir, keep)
        self.save("last.pt")
        return stop

    def _interruptible_validate(self, bar: Progress) -> dict[str, float] | None:
        """:meth:`validate` under a bar of its own in ``bar``, or None if a signal came
        first or cut it short (the loop then saves ``last.pt`` and stops)."""
        if not self.cfg.train.valid_bleu:
            return self.signals.interruptible(self.validate)
        dev = len(self.data.dev_src)
        task = bar.add_task("valid", total=dev, rate=0.0, unit="sent/s", info="")
        try:
            return self.signals.interruptible(lambda: self.validate(Tally(bar, task, dev)))
        finally:
            bar.remove_task(task)
