"""Every attention variant on the toy corpus under the same budget (steps, or
minutes): test and test_long BLEU/chrF (beam 5) and training throughput.

    python benchmarks/toy_variants.py --steps 600
    python benchmarks/toy_variants.py --minutes 3 --variants global,local_m --set train.seed=2
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from nmt.config import load_recipe
from nmt.evaluate import evaluate
from nmt.training import TRAINERS

VARIANTS = {
    "global": ["model.attention.kind=global"],
    "local_m": [
        "model.attention.kind=local_m",
        "model.attention.window=4",
        "model.attention.center=length_ratio",
    ],
    "local_p": ["model.attention.kind=local_p", "model.attention.window=4"],
    "hard": ["model.attention.kind=hard"],
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recipe", default="recipes/toy.yaml")
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--minutes", type=float, default=None, help="a time budget instead")
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--out", default=None, help="keep the runs here (default: a temp dir)")
    p.add_argument("--set", action="append", default=[], dest="overrides")
    args = p.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="toy-variants-"))
    rows = []
    for name in args.variants.split(","):
        run = out / name
        budget = (
            [f"train.max_minutes={args.minutes}", "train.max_steps=null"]
            if args.minutes
            else [f"train.max_steps={args.steps}", "train.max_minutes=null"]
        )
        cfg = load_recipe(
            args.recipe,
            [
                f"run_dir={run}",
                "train.max_epochs=null",
                "train.patience=null",
                *budget,
                *VARIANTS[name],
                *args.overrides,
            ],
        )
        summary = TRAINERS.get(cfg.train.trainer)(cfg, device="cpu").run()
        results = evaluate(run, list(cfg.data.test), device="cpu")
        rows.append((name, summary, results))
        (run / "summary.json").write_text(json.dumps(summary, indent=2))
    budget = f"{args.minutes} min" if args.minutes else f"{args.steps} steps"
    print(f"\nbudget {budget} each, runs in {out}")
    print(
        f"{'variant':10s} {'steps':>6s} {'tok/s':>7s} "
        + " ".join(f"{split + ' BLEU':>16s} {'chrF':>6s}" for split in rows[0][2])
    )
    for name, summary, results in rows:
        cells = " ".join(f"{r['bleu']:16.2f} {r['chrf']:6.2f}" for r in results.values())
        print(f"{name:10s} {summary['steps']:6d} {summary['tokens_per_s']:7.0f} {cells}")


if __name__ == "__main__":
    main()
