"""What each of ``nmt.kernels`` saves of a training step, measured side by side.

Every round trains the same batches once per setting, each setting in a fresh
process: all kernels, all but one (for each kernel), none (``train.kernels:
off``). The settings take turns
within a round, so drift of a shared machine spreads over all of them. A
kernel's gain is the step time without it minus the time with all, as a share
of the time without it; the median and range over rounds are printed.

    python benchmarks/kernels.py                      # recipes/multi30k-de-en-40ep.yaml, CPU
    python benchmarks/kernels.py --rounds 5 --steps 20
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import SHARED_MULTI30K, recipe_trainer

from nmt import kernels

NAMES = ["dropout", "loss"]


def one_setting(args: argparse.Namespace) -> None:
    """Child process: train ``--steps`` steps of round ``--round`` with ``--use`` kernels."""
    use = set(args.use.split(",")) - {""}
    with tempfile.TemporaryDirectory() as run_dir:
        overrides = [*args.overrides, "train.kernels=off", f"data.vocab={{model: {args.vocab}}}"]
        trainer = recipe_trainer(args.recipe, args.data, run_dir, "cpu", overrides)
        if "dropout" in use:
            kernels.install(trainer.model)
        if "loss" in use:  # the trainer picks the fused loss under kernels: auto
            train = dataclasses.replace(trainer.cfg.train, kernels="auto")
            trainer.cfg = dataclasses.replace(trainer.cfg, train=train)
        plan = trainer.epochs.plan(0)
        first = args.round * (args.warmup_steps + args.steps)
        batches = [trainer.data.train.collate(b) for b in plan[first : first + args.warmup_steps]]
        for batch in batches:
            trainer.train_step([batch])
        timed = plan[first + args.warmup_steps : first + args.warmup_steps + args.steps]
        seconds = 0.0
        for idx in timed:
            batch = trainer.data.train.collate(idx)
            start = time.perf_counter()
            trainer.train_step([batch])
            seconds += time.perf_counter() - start
    print(json.dumps({"ms": 1000 * seconds / len(timed)}))


def vocabulary(args: argparse.Namespace, where: str) -> str:
    """Train the recipe's SentencePiece model once, for every child to load."""
    trainer = recipe_trainer(args.recipe, args.data, where, "cpu", [*args.overrides])
    del trainer
    return str(Path(where) / "spm.model")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default="recipes/multi30k-de-en-40ep.yaml")
    p.add_argument("--data", default=str(SHARED_MULTI30K))
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=20, help="timed steps per setting and round")
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--set", action="append", default=[], dest="overrides")
    p.add_argument("--use", help=argparse.SUPPRESS)  # child process
    p.add_argument("--round", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--vocab", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.use is not None:
        return one_setting(args)

    settings = {"all": NAMES, **{f"-{n}": [m for m in NAMES if m != n] for n in NAMES}}
    settings["none"] = []
    times: dict[str, list[float]] = {name: [] for name in settings}
    with tempfile.TemporaryDirectory() as where:
        vocab = vocabulary(args, where)
        for r in range(args.rounds):
            for name, use in settings.items():
                child = [sys.executable, __file__, "--use", ",".join(use), "--round", str(r)]
                child += ["--recipe", args.recipe, "--data", args.data, "--vocab", vocab]
                child += ["--steps", str(args.steps), "--warmup-steps", str(args.warmup_steps)]
                child += [f"--set={o}" for o in args.overrides]
                done = subprocess.run(child, capture_output=True, text=True)
                if done.returncode:
                    sys.exit(f"setting {name} failed:\n{done.stderr}")
                times[name].append(json.loads(done.stdout.splitlines()[-1])["ms"])
                print(f"round {r + 1}  {name:<14} {times[name][-1]:7.1f} ms/step", flush=True)
    print(f"\n{args.recipe} {' '.join(args.overrides)}: {args.rounds} rounds of {args.steps} steps")
    for name, ms in times.items():
        print(
            f"{name:<14} median {statistics.median(ms):7.1f} ms/step  ({min(ms):.1f}-{max(ms):.1f})"
        )
    print("\ngain of each kernel (time without it − time with all) / time without it:")
    for n in NAMES:
        gains = [(w - a) / w for w, a in zip(times[f"-{n}"], times["all"])]
        print(
            f"{n:<14} median {statistics.median(gains):+6.1%}  "
            f"(rounds: {', '.join(f'{g:+.1%}' for g in gains)})"
        )
    gains = [(w - a) / w for w, a in zip(times["none"], times["all"])]
    print(f"{'all together':<14} median {statistics.median(gains):+6.1%}")


if __name__ == "__main__":
    main()
