"""nmt's training step against the loop a student writes with plain PyTorch, on the
same batches (the recipe's own buckets and padding), with the same optimiser and
precision, in one process, interleaved batch by batch (the order swapped each
time), so that a drift of the machine's speed hits both alike.

The reference is ``torch.nn.Transformer`` (pre-norm, the recipe's width, depth,
heads, feed-forward and dropout), sinusoidal positions, one embedding table for
both sides and the output layer, label-smoothed cross-entropy; its optimiser is
the recipe's (Adam, or Muon for its 2-D hidden matrices beside Adam for the rest,
``torch.optim``'s own). Prints each one's target tokens/s, the ratio nmt /
reference, each one's share of the machine's matmul rate (6 × parameters FLOPs a
target token) and where nmt's step goes: torch.profiler's most expensive operators
and the step time outside every operator (Python, the data, host waits); on CUDA
also each model's waits for the GPU in a step, by the line that asks
(``common.host_syncs``).

    python benchmarks/vs_reference.py --steps 60                       # the shipped recipe, CPU
    python benchmarks/vs_reference.py --set train.precision=bf16
    python benchmarks/vs_reference.py --device cuda --set train.batch_tokens=8192
    python benchmarks/vs_reference.py --device cuda --compile          # both compiled
    python benchmarks/vs_reference.py --trace step.json --profile-steps 3   # a trace

``--trace`` writes the profiled steps as a Chrome trace (open it in Perfetto or
chrome://tracing). Each model's first step is printed apart: with ``--compile`` it is
where the compiling happens, from whatever caches TorchInductor has.

The figures: docs/benchmarks.md ("nmt against plain PyTorch").
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

import torch
import torch.nn.functional as F
from common import (
    SHARED_MULTI30K,
    MatmulProbe,
    host_syncs,
    recipe_trainer,
    synchronizer,
    user_errors,
)
from torch import nn
from torch.profiler import ProfilerActivity, profile

from nmt.data.vocab import PAD
from nmt.errors import NmtError
from nmt.io.files import atomic_write


class Reference(nn.Module):
    """A pre-norm Transformer encoder-decoder as PyTorch ships it, tied embeddings."""

    def __init__(
        self,
        vocab: int,
        d: int,
        heads: int,
        ffn: int,
        layers: tuple[int, int],
        dropout: float,
        max_len: int = 1024,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d, padding_idx=PAD)
        nn.init.normal_(self.embed.weight, std=d**-0.5)
        with warnings.catch_warnings():  # nested tensors are for post-norm encoders
            warnings.simplefilter("ignore")
            self.core = nn.Transformer(
                d, heads, layers[0], layers[1], ffn, dropout, batch_first=True, norm_first=True
            )
        pos = torch.arange(max_len).unsqueeze(1) * torch.exp(
            torch.arange(0, d, 2) * (-math.log(10000.0) / d)
        )
        table = torch.zeros(max_len, d)
        table[:, 0::2], table[:, 1::2] = torch.sin(pos), torch.cos(pos)
        self.register_buffer("positions", table, persistent=False)
        self.drop = nn.Dropout(dropout)
        self.scale = d**0.5

    def embedded(self, ids: torch.Tensor) -> torch.Tensor:
        return self.drop(self.embed(ids) * self.scale + self.positions[: ids.size(1)])

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        t = tgt_in.size(1)
        causal = torch.ones(t, t, dtype=torch.bool, device=src.device).triu(1)  # (T,T)
        hidden = self.core(
            self.embedded(src),
            self.embedded(tgt_in),
            tgt_mask=causal,
            tgt_is_causal=True,
            src_key_padding_mask=src == PAD,
            tgt_key_padding_mask=tgt_in == PAD,
            memory_key_padding_mask=src == PAD,
        )
        return hidden @ self.embed.weight.T  # (B,T,V)


def optimiser_of(model: nn.Module, t) -> list[torch.optim.Optimizer]:
    """The recipe's optimiser for the reference: Adam, or Muon for the 2-D hidden
    matrices (not the embedding) and Adam for the rest."""
    adam = {"lr": t.lr, "betas": tuple(t.betas), "eps": t.eps, "fused": True}
    if t.optimizer == "adam":
        return [torch.optim.Adam(model.parameters(), **adam)]
    hidden = [p for n, p in model.named_parameters() if p.dim() == 2 and "embed" not in n]
    chosen = {id(p) for p in hidden}
    rest = [p for p in model.parameters() if id(p) not in chosen]
    muon = torch.optim.Muon(
        hidden,
        lr=t.muon_lr or t.lr,
        momentum=t.muon_momentum,
        weight_decay=t.weight_decay,
        adjust_lr_fn="match_rms_adamw",
    )
    return [muon, torch.optim.Adam(rest, **adam)]


@user_errors
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default="recipes/multi30k-de-en.yaml")
    p.add_argument("--data", default=str(SHARED_MULTI30K))
    p.add_argument("--steps", type=int, default=60, help="timed batches, each model")
    p.add_argument("--warmup-steps", type=int, default=10)
    p.add_argument("--device", default="cpu")
    p.add_argument("--compile", action="store_true", help="torch.compile both")
    p.add_argument("--rows", type=int, default=15, help="operators in the profile")
    p.add_argument("--set", action="append", default=[], dest="overrides")
    p.add_argument("--trace", help="write nmt's profiled steps here (Chrome trace JSON)")
    p.add_argument(
        "--profile-steps", type=int, help="the timed batches profiled (default: all of them)"
    )
    args = p.parse_args()
    overrides = [*args.overrides, *(["train.compile=true"] if args.compile else [])]
    if args.profile_steps is not None and not 1 <= args.profile_steps <= args.steps:
        raise NmtError(f"--profile-steps must be in 1..{args.steps} (--steps, the timed batches)")
    if args.trace and Path(args.trace).is_dir():  # before minutes of benchmarking, not after
        raise NmtError(f"{args.trace}: is a directory (--trace names a file)")

    with tempfile.TemporaryDirectory() as run_dir:
        nmt = recipe_trainer(args.recipe, args.data, run_dir, args.device, overrides)
        cfg, t, device = nmt.cfg, nmt.cfg.train, nmt.device
        m = cfg.model
        torch.manual_seed(t.seed)
        ref = Reference(
            len(nmt.data.vocabs.tgt),
            m.d_model,
            m.heads,
            m.ffn,
            (m.encoder_layers, m.decoder_layers),
            m.dropout,
        ).to(device)
        forward = torch.compile(ref, dynamic=True) if args.compile else ref
        optimisers = optimiser_of(ref, t)
        sync = synchronizer(device)

        def ref_step(batch) -> None:
            ref.train()
            with nmt._autocast():
                logits = forward(batch.src, batch.tgt_in)
                loss = F.cross_entropy(
                    logits.flatten(0, 1).float(),
                    batch.tgt_out.flatten(),
                    ignore_index=PAD,
                    label_smoothing=t.label_smoothing,
                )
            loss.backward()
            torch.nn.utils.clip_grad_norm_(ref.parameters(), t.clip_norm)
            for o in optimisers:
                o.step()
                o.zero_grad(set_to_none=True)

        steps = {"nmt": lambda b: nmt.train_step([b]), "reference": ref_step}
        plan = nmt.epochs.plan(0)
        total = args.warmup_steps + args.steps
        batches = [nmt.data.train.collate(plan[i % len(plan)]).to(device) for i in range(total)]
        seconds: dict[str, list[float]] = {"nmt": [], "reference": []}
        first: dict[str, float] = {}
        for i, batch in enumerate(batches):
            order = ["nmt", "reference"] if i % 2 == 0 else ["reference", "nmt"]
            for name in order:
                sync()
                start = time.perf_counter()
                steps[name](batch)
                sync()
                if i >= args.warmup_steps:
                    seconds[name].append(time.perf_counter() - start)
                first.setdefault(name, time.perf_counter() - start)
        print(
            f"first step (compiling included with --compile): nmt {first['nmt']:.1f} s, "
            f"reference {first['reference']:.1f} s"
        )
        tokens = sum(b.tgt_tokens for b in batches[args.warmup_steps :])
        dtype = torch.bfloat16 if nmt.bf16 else torch.float32
        probe = MatmulProbe(8192 if device.type == "cuda" else 2048, device.type, dtype)
        for _ in range(5):
            probe.time_one()
        rates = {}
        for name, model in (("nmt", nmt.model), ("reference", ref)):
            params = sum(q.numel() for q in model.parameters())
            rate = tokens / sum(seconds[name])
            share = 6 * params * rate / (probe.gflops() * 1e9)
            rates[name] = rate
            print(
                f"{name:>9}: {rate:,.0f} target tok/s, median step "
                f"{statistics.median(seconds[name]) * 1000:.1f} ms, {params / 1e6:.2f}M "
                f"parameters, {share:.1%} of the {probe.gflops():,.0f} GFLOP/s "
                f"{str(dtype).removeprefix('torch.')} matmul rate"
            )
        how = ("bf16 autocast" if nmt.bf16 else "fp32") + (", compiled" if args.compile else "")
        print(
            f"nmt / reference: {rates['nmt'] / rates['reference']:.3f} "
            f"({args.steps} batches each, interleaved; {device}, {how})"
        )

        if device.type == "cuda":  # each one leaves the GPU idle while the host catches up
            for name in ("nmt", "reference"):
                places = Counter(host_syncs(functools.partial(steps[name], batches[0])))
                where = ", ".join(f"{p} x{n}" for p, n in places.most_common())
                print(f"{name}: {places.total()} host waits for the GPU in a step ({where})")

        activities = [ProfilerActivity.CPU] + (
            [ProfilerActivity.CUDA] if device.type == "cuda" else []
        )
        sync()
        start = time.perf_counter()
        profiled = batches[args.warmup_steps :][: args.profile_steps]
        with profile(activities=activities) as prof:
            for batch in profiled:
                nmt.train_step([batch])
            sync()
        wall = time.perf_counter() - start
        table = prof.key_averages()
        inside = sum(e.self_cpu_time_total for e in table) / 1e6
        print(
            f"\nnmt's step under the profiler: {wall / len(profiled) * 1000:.1f} ms a step; "
            f"{max(wall - inside, 0) / wall:.0%} of the wall time outside every operator "
            "(Python, data, host waits)"
        )
        print(table.table(sort_by="self_cpu_time_total", row_limit=args.rows))
        if device.type == "cuda":
            print(table.table(sort_by="self_cuda_time_total", row_limit=args.rows))
        if args.trace:  # torch writes to a path; the trace reaches args.trace whole
            prof.export_chrome_trace(f"{run_dir}/trace.json")
            trace = Path(run_dir, "trace.json").read_bytes()
            atomic_write(args.trace, lambda f: f.write(trace))
            print(f"trace: {args.trace}")


if __name__ == "__main__":
    main()
