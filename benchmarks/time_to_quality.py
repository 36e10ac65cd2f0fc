"""Time to quality: how long a user waits for a recipe to reach each BLEU threshold,
on the CPU or a GPU.

Trains RECIPE in a fresh process (``nmt train``), keeping a snapshot every
``--every`` updates (``train.valid_every`` with dev loss only, so that a snapshot
costs no decoding), then translates ``--split`` with every snapshot under the
recipe's decode settings (beam 5 in the reference recipe) and prints, per
snapshot, two times and its BLEU:

- ``wall_s``, what a user waits: from the ``nmt train`` command's start (the
  interpreter, the vocabulary and data cache, the model, every update and
  checkpoint) to the snapshot's file, less the snapshots' own validations (a run
  of the recipe validates on its own schedule instead); with ``--cache cold`` the
  data cache starts empty (the vocabulary is trained and the corpus encoded
  within the time), with ``warm`` (the default) it is prepared before the clock
  starts, as for every run after a corpus's first;
- ``train_s``, the updates alone: the run's elapsed time less its validations.

Then the first times at which each threshold was reached, with the run's peak
RSS, the hardware and the commit. The scoring is not counted. ``--average K``
also scores, at each snapshot, the mean of the last K (what a run ending there
with ``decode.average_last: K`` would translate with).

Tune a recipe on the dev split (``--split val``); the test split reports, it never
chooses. Results go to RUN/time_to_quality-SPLIT.json; docs/benchmarks.md has the
table.

    python benchmarks/time_to_quality.py recipes/multi30k-de-en.yaml --every 250
    python benchmarks/time_to_quality.py recipes/multi30k-de-en.yaml --split val \\
        --set train.lr=1e-3 --set train.max_minutes=12 --run-dir runs/ttq-lr1e-3
    python benchmarks/time_to_quality.py recipes/multi30k-de-en.yaml --run-dir runs/ttq \\
        --score-only --split test_2016_flickr   # score an earlier run's snapshots again
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import yaml
from common import SHARED_MULTI30K, run_child, user_errors

from nmt.data.pipeline import load_split
from nmt.decoding.metrics import corpus_score
from nmt.decoding.search import translate_lines
from nmt.decoding.translate import one_line
from nmt.errors import NmtError
from nmt.export.averaging import average, kept_checkpoints
from nmt.io import checkpoint
from nmt.io.files import write_text
from nmt.io.rundir import flatten
from nmt.model.load import model_from_payload
from nmt.setup.device import where_it_ran
from nmt.setup.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Snapshot:
    step: int
    wall_s: float  # from the command's start to this snapshot, its validations excluded
    train_s: float  # the updates up to this one alone, validations excluded
    bleu: float
    chrf: float
    averaged_bleu: float | None  # the mean of the last --average snapshots, if asked


# What this benchmark sets in every run it trains (not the recipe's own overrides)
BENCHMARK_KEYS = {
    "data.dir",
    "data.cache_dir",
    "data.test",
    "run_dir",
    "train.valid_every",
    "train.keep_checkpoints",
    "train.valid_bleu",
    "train.early_stopping",
    "train.patience",
}


def cache_dir(args: argparse.Namespace, run_dir: Path) -> list[str]:
    """The data cache of the timed run: an empty one of its own (``--cache cold``), or
    the default one prepared before the clock starts (``warm``)."""
    if args.cache == "cold":
        cold = run_dir.parent / f"{run_dir.name}-cache"
        shutil.rmtree(cold, ignore_errors=True)
        return [f"data.cache_dir={cold}"]
    command = [sys.executable, "-m", "nmt", "data", "prepare", args.recipe]
    command += [a for s in [f"data.dir={args.data}", *args.set] for a in ("--set", s)]
    run_child(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    return []


def train(args: argparse.Namespace, run_dir: Path) -> tuple[float, float]:
    """``nmt train`` in a fresh process, snapshots every ``args.every`` updates;
    returns its wall time and when it started (seconds since the epoch)."""
    sets = [
        f"data.dir={args.data}",
        *cache_dir(args, run_dir),
        f"run_dir={run_dir}",
        f"train.valid_every={args.every}",
        "train.keep_checkpoints=10000",
        "train.valid_bleu=false",  # a snapshot costs a dev-loss pass, no decoding
        "train.early_stopping=loss",
        "train.patience=null",
        "data.test=[]",  # scored here, afterwards
        *args.set,
    ]
    command = [sys.executable, "-m", "nmt", "train", args.recipe, "--device", args.device]
    command += [a for s in sets for a in ("--set", s)]
    print("$", " ".join(command[1:]), flush=True)
    launched, start = time.time(), time.perf_counter()
    run_child(command, cwd=ROOT)
    return time.perf_counter() - start, launched


def seconds_at(run_dir: Path, launched: float | None) -> dict[int, tuple[float, float]]:
    """Per snapshot: (wall_s, train_s), each less every validation up to it; wall_s
    from ``launched`` to the snapshot file's time (NaN when unknown)."""
    spent, at = 0.0, {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if "valid_seconds" in record:
            spent += record["valid_seconds"]
            step = record["step"]
            saved = run_dir / f"step-{step}.pt"
            wall = math.nan
            if launched is not None and saved.is_file():
                wall = saved.stat().st_mtime - launched - spent
            at[step] = (wall, record["elapsed"] - spent)
    return at


def overrides_of(run_dir: Path, recipe: str) -> list[str]:
    """The overrides a run was trained with, read from RUN/recipe.yaml against the
    recipe: every key whose value differs, less what this benchmark sets and what
    the trainer measures on the data."""
    trained = flatten(yaml.safe_load((run_dir / "recipe.yaml").read_text(encoding="utf-8")))
    base = flatten(load_recipe(recipe).to_dict())
    measured = {"model.attention.ratio", "model.positions.ratio"}
    return [
        f"{key}={json.dumps(value)}"
        for key, value in sorted(trained.items())
        if key not in BENCHMARK_KEYS | measured and base.get(key) != value
    ]


def score(payload: dict, path: Path, split: str, device: torch.device) -> tuple[float, float]:
    """BLEU and chrF of one checkpoint's translation of ``split``."""
    loaded = model_from_payload(payload, path, device)
    src, refs = load_split(loaded.cfg.data, split)
    cfg, vocabs = loaded.cfg, loaded.vocabs
    nbest = translate_lines(loaded.model, vocabs.src, vocabs.tgt, src, cfg.decode, device)
    hyps = [one_line(h[0].text) for h in nbest]
    return corpus_score("bleu", hyps, [refs]).score, corpus_score("chrf", hyps, [refs]).score


def snapshots(args: argparse.Namespace, run_dir: Path, launched: float | None) -> list[Snapshot]:
    """Every kept snapshot scored on ``args.split``, oldest first."""
    seconds, device = seconds_at(run_dir, launched), torch.device(args.device)
    paths = kept_checkpoints(run_dir)
    if not paths:
        raise NmtError(f"{run_dir}: no snapshot (step-N.pt) to score")
    if missing := [p.name for p in paths if int(p.stem.removeprefix("step-")) not in seconds]:
        raise NmtError(f"{run_dir / 'metrics.jsonl'}: no validation record of {missing[0]}")
    rows = []
    for i, path in enumerate(paths):
        step = int(path.stem.removeprefix("step-"))
        bleu, chrf = score(checkpoint.load(path), path, args.split, device)
        averaged = None
        if args.average > 1 and i + 1 >= args.average:
            mean = average(paths[i + 1 - args.average : i + 1])
            averaged = score(mean, path, args.split, device)[0]
        wall, train_s = seconds[step]
        rows.append(Snapshot(step, wall, train_s, bleu, chrf, averaged))
        shown = "" if averaged is None else f"  averaged {averaged:.2f}"
        print(
            f"step {step:>6}  {wall:7.0f} s waited  {train_s:7.0f} s training  BLEU {bleu:5.2f}"
            + shown,
            flush=True,
        )
    return rows


def first_reached(rows: list[Snapshot], threshold: float) -> dict[str, float | int] | None:
    """The first snapshot (itself or its average) at or above ``threshold``."""
    for row in rows:
        best = max(row.bleu, row.averaged_bleu or 0.0)
        if best >= threshold:
            return {"step": row.step, "wall_s": row.wall_s, "train_s": row.train_s, "bleu": best}
    return None


def hardware(device: str) -> str:
    """The CPU model and core count, or the GPU's name, and the torch build."""
    where = where_it_ran(torch.device(device))
    what = (
        where["device"] if device.startswith("cuda") else f"{where['cpu']}, {where['cores']} cores"
    )
    return f"{what}, torch {where['torch']}"


def commit() -> str:
    def git(*a: str) -> str:
        done = subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("-dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


TRAINED = ("commit", "date", "overrides", "cache", "process_wall_s", "launched")


def snapshot_every(run_dir: Path) -> int:
    """The updates between the run's snapshots, from its own recipe (a rescoring's
    ``--every`` is not what trained)."""
    recipe = yaml.safe_load((run_dir / "recipe.yaml").read_text(encoding="utf-8"))
    return recipe["train"]["valid_every"]


def trained_as(run_dir: Path, recipe: str) -> dict:
    """How an earlier run of this benchmark trained ``run_dir`` (commit, date,
    overrides, cache, wall time, start), read from the result it wrote, so that
    scoring it again on another split reports the same run; without one, the
    overrides are read from the run's own recipe."""
    for earlier in sorted(run_dir.glob("time_to_quality*.json")):
        known = json.loads(earlier.read_text())
        return {k: known.get(k) for k in TRAINED}
    unknown = dict.fromkeys(TRAINED)
    return {**unknown, "commit": "unknown", "overrides": overrides_of(run_dir, recipe)}


@user_errors
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe")
    parser.add_argument("--data", default=str(SHARED_MULTI30K))
    parser.add_argument("--run-dir", default=None, help="default: runs/ttq-RECIPE")
    parser.add_argument("--every", type=int, default=250, help="updates between snapshots")
    parser.add_argument("--split", default="test_2016_flickr", help="val to tune, test to report")
    parser.add_argument("--thresholds", type=float, nargs="+", default=[34.7, 38.0, 40.0])
    parser.add_argument("--average", type=int, default=0, help="also score the mean of the last K")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--set", action="append", default=[], help="a recipe override, KEY=VALUE")
    parser.add_argument("--score-only", action="store_true", help="score an existing run again")
    parser.add_argument(
        "--cache", choices=("warm", "cold"), default="warm", help="the data cache at the start"
    )
    args = parser.parse_args()
    if args.every < 1:
        raise NmtError(f"--every {args.every}: updates between snapshots, at least 1")
    if args.average < 0:
        raise NmtError(f"--average {args.average}: a number of snapshots, 0 or more")
    run_dir = Path(args.run_dir or f"runs/ttq-{Path(args.recipe).stem}").resolve()
    load_split(load_recipe(args.recipe, [f"data.dir={args.data}"]).data, args.split)
    if args.score_only and not (run_dir / "metrics.jsonl").is_file():
        raise NmtError(f"--score-only: {run_dir} holds no run of this benchmark to score")
    if args.score_only:
        trained = trained_as(run_dir, args.recipe)
    else:  # the code and settings that train, taken before training
        trained = {"commit": commit(), "date": time.strftime("%Y-%m-%d"), "overrides": args.set}
        trained["cache"] = args.cache
        trained["process_wall_s"], trained["launched"] = train(args, run_dir)
    rows = snapshots(args, run_dir, trained["launched"])
    summary = json.loads((run_dir / "summary.json").read_text())
    reached = {str(t): first_reached(rows, t) for t in args.thresholds}
    result = {
        "recipe": args.recipe,
        "split": args.split,
        "every": snapshot_every(run_dir),
        "average": args.average,
        "hardware": hardware(args.device),
        **trained,
        "steps": summary["steps"],
        "wall_s": max((r.wall_s for r in rows), default=0.0),
        "train_s": max((r.train_s for r in rows), default=0.0),
        "peak_rss_mb": summary.get("peak_rss_mb"),
        "reached": reached,
        "snapshots": [asdict(r) for r in rows],
    }
    write_text(run_dir / f"time_to_quality-{args.split}.json", json.dumps(result, indent=2) + "\n")
    overrides = " ".join(result["overrides"])
    print(f"\n{args.recipe} {overrides}: {result['hardware']}, commit {result['commit']}")
    print(f"peak RSS {result['peak_rss_mb']:.0f} MB; {summary['steps']} updates")
    cache = f"{result['cache']} cache" if result["cache"] else "cache unknown"
    for threshold, first in reached.items():
        when = (
            "not reached"
            if first is None
            else (
                f"{first['wall_s'] / 60:.1f} min from the command's start ({cache}), "
                f"{first['train_s'] / 60:.1f} min of updates (update {first['step']}, "
                f"BLEU {first['bleu']:.2f})"
            )
        )
        print(f"BLEU >= {threshold} on {args.split}: {when}")
    best = max(rows, key=lambda r: r.bleu, default=None)
    if best is not None:
        print(
            f"best: BLEU {best.bleu:.2f} at update {best.step} ({best.wall_s / 60:.1f} min "
            f"waited, {best.train_s / 60:.1f} min of updates)"
        )


if __name__ == "__main__":
    main()
