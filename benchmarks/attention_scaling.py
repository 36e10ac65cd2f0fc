"""Forward+backward time and peak memory of one cross-attention layer as S = T grows.

Each (variant, S) runs in a fresh subprocess. Peak memory is the most tensor memory
the step holds at once, what it found (parameters, inputs, their gradients) included:
``torch.cuda.max_memory_allocated`` on CUDA and, on the CPU, the same sum taken from
the allocator's events (``torch.profiler`` with ``profile_memory``) in one extra step.
The process's peak RSS growth is printed beside it: it adds what the first step
loads (thread pools, kernel libraries: ~12 MB even at S = 64) and what glibc keeps
after frees, and it varies between runs of the same code (108–132 MB for local_m at
S = 4096 in four runs).
B=1, D=256, H=4, window 10 by default. On a shared host whose speed drifts,
``--rounds R`` runs the variants R times in turn and reports medians, and the range
of each speed ratio over the rounds.

    python benchmarks/attention_scaling.py
    python benchmarks/attention_scaling.py --sizes 4096 --variants global,local_p --rounds 5
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from nmt.attention import ATTENTION
from nmt.attention.base import Context
from nmt.setup.config import from_dict
from nmt.setup.model import ModelConfig
from nmt.training.objective import attention_loss

VARIANTS = {  # name: recipe options
    "global": {"kind": "global"},  # PyTorch's fused kernel: never holds a T x S matrix
    # the same maths through an explicit T x S softmax: what non-dot scores, hard
    # attention, and any request for the weights (nmt attention, compare) run
    "global-explicit": {"kind": "global"},
    "local_m": {"kind": "local_m", "window": 10},
    "local_m-dense": {"kind": "local_m", "window": 10, "path": "dense"},
    "local_p": {"kind": "local_p", "window": 10},
    "local_p-dense": {"kind": "local_p", "window": 10, "path": "dense"},
    "hard": {"kind": "hard", "estimator": "reinforce"},  # the estimator with a loss of its own
}


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_peak_mb(step: Callable[[], None], held: list[torch.Tensor]) -> float:
    """The most tensor memory alive at once during ``step``: the bytes of ``held``
    (alive before it) plus the peak of the allocations and frees it makes."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = prof.profiler.kineto_results.events()
    changes = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
    live = peak = 0
    for _, nbytes in changes:  # allocations are positive, frees negative
        live += nbytes
        peak = max(peak, live)
    return (peak + sum(t.untyped_storage().nbytes() for t in held)) / 2**20


NEED_WEIGHTS = {"global-explicit"}


def one(variant: str, size: int, device: str, repeats: int, d_model: int, heads: int) -> dict:
    torch.manual_seed(0)
    cfg = from_dict(ModelConfig, {"attention": VARIANTS[variant]}).attention
    layer = ATTENTION.get(cfg.kind)(cfg, d_model, heads, dropout=0.0).to(device).train()
    query = torch.randn(1, size, d_model, device=device, requires_grad=True)
    memory = torch.randn(1, size, d_model, device=device, requires_grad=True)
    src_mask = torch.ones(1, 1, size, dtype=torch.bool, device=device)
    positions = torch.arange(size, device=device)

    reward = torch.zeros(1, size, device=device)  # (B,T), for hard attention's REINFORCE
    tgt_mask = torch.ones(1, size, dtype=torch.bool, device=device)

    def step() -> None:
        ctx = Context(positions, need_weights=variant in NEED_WEIGHTS)
        out = layer(query, layer.project_memory(memory, src_mask), ctx)
        loss = out.context.sum()
        extra, _ = attention_loss([[out]], reward, tgt_mask)  # as the objective does every step
        (loss if extra is None else loss + extra).backward()

    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    before = rss_mb()  # inputs and parameters exist; the growth above this is the step's
    step()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    rss = rss_mb() - before
    if device == "cuda":
        peak = torch.cuda.max_memory_allocated() / 2**20
    else:
        held = [query, memory, src_mask, positions, reward, tgt_mask, *layer.parameters()]
        held += [t.grad for t in held if t.grad is not None]
        peak = cpu_peak_mb(step, held)
    return {
        "variant": variant,
        "S": size,
        "ms": 1000 * sorted(times)[len(times) // 2],
        "peak_mb": peak,
        "rss_mb": max(rss, 0.0),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="64,256,1024,4096")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--rounds", type=int, default=1, help="sweeps of the variants, in turn")
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--one", nargs=2, metavar=("VARIANT", "S"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        result = one(
            args.one[0], int(args.one[1]), args.device, args.repeats, args.d_model, args.heads
        )
        print(json.dumps(result))
        return
    variants = args.variants.split(",")
    rows = []
    for size in map(int, args.sizes.split(",")):
        runs: dict[str, list[dict]] = {v: [] for v in variants}
        for _ in range(args.rounds):
            for variant in variants:
                runs[variant].append(measure(args, variant, size))
        for variant in variants:
            r = {
                "variant": variant,
                "S": size,
                "ms": statistics.median(x["ms"] for x in runs[variant]),
                "peak_mb": statistics.median(x["peak_mb"] for x in runs[variant]),
                "rss_mb": statistics.median(x["rss_mb"] for x in runs[variant]),
                "rounds": runs[variant],
            }
            rows.append(r)
            print(
                f"S=T={size:5d}  {variant:15s} {r['ms']:9.1f} ms  peak {r['peak_mb']:8.1f} MB"
                f"  (RSS +{r['rss_mb']:.1f} MB)",
                flush=True,
            )
    largest = max(r["S"] for r in rows)
    for base in ("global", "global-explicit"):
        ref = next((r for r in rows if r["S"] == largest and r["variant"] == base), None)
        if ref is None:
            continue
        print(f"\nat S = {largest}, relative to {base}:")
        for r in rows:
            if r["S"] == largest:
                speed = ref["ms"] / r["ms"]
                memory = ref["peak_mb"] / max(r["peak_mb"], 0.1)
                per_round = [a["ms"] / b["ms"] for a, b in zip(ref["rounds"], r["rounds"])]
                spread = (
                    f"  (rounds: {min(per_round):.1f}-{max(per_round):.1f}x)"
                    if args.rounds > 1
                    else ""
                )
                print(
                    f"  {r['variant']:15s} {speed:6.1f}x faster  {memory:6.1f}x less memory"
                    + spread
                )


def measure(args: argparse.Namespace, variant: str, size: int) -> dict:
    """One (variant, S) in a fresh interpreter."""
    cmd = [sys.executable, __file__, "--one", variant, str(size), "--device", args.device]
    for flag in ("repeats", "d_model", "heads"):
        cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
