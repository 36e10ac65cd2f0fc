"""Where a training step's time goes: per-step times on batch shapes seen for the
first time and again, then a torch.profiler table of the most expensive operators,
and a step's operator time in four parts: the optimiser's step, the model's matrix
products, its copies of parameter-shaped tensors (bf16 autocast's casts of the fp32
weights among them, what bf16 weights with fp32 master copies could save) and the
rest.

    python benchmarks/profile_step.py --steps 40
    python benchmarks/profile_step.py --device cuda --set train.batch_tokens=8192
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from common import SHARED_MULTI30K, recipe_trainer, synchronizer
from torch.profiler import ProfilerActivity, profile


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default="recipes/multi30k-de-en-40ep.yaml")
    p.add_argument("--data", default=str(SHARED_MULTI30K))
    p.add_argument("--steps", type=int, default=40, help="batches per pass and profiled steps")
    p.add_argument("--device", default="cpu")
    p.add_argument("--rows", type=int, default=20)
    p.add_argument("--set", action="append", default=[], dest="overrides")
    args = p.parse_args()

    with tempfile.TemporaryDirectory() as run_dir:
        trainer = recipe_trainer(args.recipe, args.data, run_dir, args.device, args.overrides)
        cuda = trainer.device.type == "cuda"
        sync = synchronizer(trainer.device)
        batches = [trainer.data.train.collate(b) for b in trainer.epochs.plan(0)[: args.steps]]

        def step(batch) -> float:
            start = time.perf_counter()
            trainer.train_step([batch])
            sync()
            return time.perf_counter() - start

        first = [step(b) for b in batches]  # every shape new
        again = [step(b) for b in batches]  # the same shapes once more
        print(f"median step, shapes new:  {statistics.median(first) * 1000:.1f} ms")
        print(f"median step, shapes seen: {statistics.median(again) * 1000:.1f} ms")
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities, record_shapes=True) as prof:
            for b in batches:
                step(b)
        table = prof.key_averages()
        print(table.table(sort_by="self_cpu_time_total", row_limit=args.rows))
        if cuda:
            print(table.table(sort_by="self_cuda_time_total", row_limit=args.rows))
        shapes = {tuple(p.shape) for p in trainer.model.parameters()}
        print(f"a step's operator time (host; mean over {len(batches)} steps):")
        n = len(batches)
        for part, (calls, us) in where_the_time_goes(prof.events(), shapes).items():
            print(f"  {part}: {us / n / 1000:.1f} ms in {calls / n:.0f} calls")


PRODUCTS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm")
COPIES = ("aten::copy_", "aten::_to_copy")


def where_the_time_goes(events, parameter_shapes: set[tuple[int, ...]]) -> dict[str, list]:
    """Operator self time (µs) and calls in four parts: the optimiser's step (Muon's
    Newton–Schulz products among it), the model's matrix products, its copies whose
    input has a parameter's shape (bf16 autocast casts each weight once a forward:
    at most what bf16 weights with fp32 master copies could save) and the rest."""
    parts: dict[str, list] = {
        name: [0, 0.0]
        for name in ("optimiser step", "matrix products", "copies of parameter shape", "the rest")
    }
    for e in events:
        if e.device_type.name != "CPU":
            continue
        parent = e
        while parent is not None and not parent.name.startswith("Optimizer.step"):
            parent = parent.cpu_parent
        if parent is not None:
            part = "optimiser step"
        elif e.name in PRODUCTS:
            part = "matrix products"
        elif e.name in COPIES and e.input_shapes and tuple(e.input_shapes[0]) in parameter_shapes:
            part = "copies of parameter shape"
        else:
            part = "the rest"
        parts[part][0] += 1
        parts[part][1] += e.self_cpu_time_total
    return parts


if __name__ == "__main__":
    main()
