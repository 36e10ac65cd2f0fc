"""Training throughput of a recipe (default: recipes/multi30k-de-en-40ep.yaml, the
recipe at which docs/benchmarks.md's throughput figures were measured).

Prints time per step, target tokens/s, the implied time per epoch, the padding
fraction, peak RSS, page faults per step, and model FLOP/s against the
machine's matmul rate in the precision training runs at (6 x parameters FLOPs
per target token: forward + backward, as is customary): fp32 on the CPU, bf16
on CUDA or with ``--set train.precision=bf16``.
A shared host's speed drifts, within a run too (2 cores here: 178-234 GFLOP/s
between one run's start and end), so the machine's rate is sampled all through
the timed steps: one timed matmul after every window of --probe-every steps,
kept out of the training time. Each window's fraction is printed as a range.
The script runs under the shell's allocator (glibc's unless ``LD_PRELOAD`` names
another), which it prints: ``nmt`` commands choose TCMalloc where it is installed.

    python benchmarks/train_throughput.py --steps 200
    python benchmarks/train_throughput.py --set model.attention.kind=local_m
    python benchmarks/train_throughput.py --device cuda --set train.compile=true
    python benchmarks/train_throughput.py --set train.precision=bf16
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time

import torch
from common import SHARED_MULTI30K, MatmulProbe, recipe_trainer, synchronizer

from nmt.setup.allocator import allocator_in_use
from nmt.training.state import peak_rss_mb


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default="recipes/multi30k-de-en-40ep.yaml")
    p.add_argument("--data", default=str(SHARED_MULTI30K))
    p.add_argument("--steps", type=int, default=200, help="timed steps")
    p.add_argument("--warmup-steps", type=int, default=10, help="untimed steps first")
    p.add_argument("--probe-every", type=int, default=5, help="steps between matmul probes")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    p.add_argument("--set", action="append", default=[], dest="overrides")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as run_dir:
        trainer = recipe_trainer(args.recipe, args.data, run_dir, args.device, args.overrides)
        t = trainer.cfg.train
        plan = trainer.epochs.plan(0)
        steps_per_epoch = len(plan) / t.accumulate
        cuda = trainer.device.type == "cuda"

        # against the rate of the matmuls training runs: bf16 under autocast (train.precision)
        dtype = torch.bfloat16 if trainer.bf16 else torch.float32
        probe = MatmulProbe(8192 if cuda else 2048, trainer.device.type, dtype)
        params = sum(p.numel() for p in trainer.model.parameters())
        sync = synchronizer(trainer.device)

        def run(steps: range) -> tuple[int, float]:
            """Train on the plan's batches ``steps``: (target tokens, seconds)."""
            tokens = 0
            sync()
            start = time.perf_counter()
            for step in steps:
                i = step * t.accumulate % len(plan)
                batches = [trainer.data.train.collate(b) for b in plan[i : i + t.accumulate]]
                trainer.train_step(batches)
                tokens += sum(b.tgt_tokens for b in batches)
            sync()
            return tokens, time.perf_counter() - start

        run(range(args.warmup_steps))
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        tokens, seconds, fractions = 0, 0.0, []  # fractions: one per window
        for lo in range(args.warmup_steps, args.warmup_steps + args.steps, args.probe_every):
            n, s = run(range(lo, min(lo + args.probe_every, args.warmup_steps + args.steps)))
            tokens, seconds = tokens + n, seconds + s
            fractions.append(6 * params * n / s / (probe.flops / probe.time_one()))
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        machine = probe.gflops()
        rate = tokens / seconds
        achieved = 6 * params * rate / 1e9
        rate_name = "bf16 matmul rate" if trainer.bf16 else "fp32 matmul rate"
        memory = torch.cuda.max_memory_allocated() / 2**20 if cuda else None
        print(f"recipe            {args.recipe} {' '.join(args.overrides)}")
        threads, allocator = torch.get_num_threads(), allocator_in_use()
        print(f"device            {trainer.device} ({threads} threads, {allocator} malloc)")
        print(f"parameters        {params / 1e6:.2f} M")
        padding = trainer.data.train.padding_fraction(plan)
        print(f"batches/epoch     {len(plan)} (padding {padding:.1%})")
        print(f"time per step     {seconds / args.steps * 1000:.0f} ms over {args.steps} steps")
        print(f"target tokens/s   {rate:.0f}")
        print(f"time per epoch    {seconds / args.steps * steps_per_epoch:.0f} s (estimated)")
        print(f"peak RSS          {peak_rss_mb():.0f} MB (the probe's matrices included)")
        print(f"page faults       {faults / args.steps:.0f} a step (fresh pages, minor faults)")
        if memory is not None:
            print(f"peak GPU memory   {memory:.0f} MB (allocated)")
        print(f"model FLOP/s      {achieved:.1f} GFLOP/s ({6 * params / 1e6:.0f} MFLOP/token)")
        print(
            f"{rate_name}  {machine:.1f} GFLOP/s (one {probe.a.size(0)}² product after every"
            f" {args.probe_every} steps: {len(fractions)} samples)"
        )
        print(
            f"efficiency        {achieved / machine:.1%} of the machine (per window: median"
            f" {statistics.median(fractions):.1%}, {min(fractions):.1%}-{max(fractions):.1%})"
        )


if __name__ == "__main__":
    main()
