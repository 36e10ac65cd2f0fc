"""Tune the decoding remedies for long inputs on dev: every setting of a grid
(GNMT's length penalty α × coverage penalty β, a word reward γ, a least length) on
each run's checkpoint, on dev splits (``val*K``), with no retraining; prints BLEU
and the length ratio per setting and run, and the setting chosen for each remedy.
The choice protects the first split (the plain one, ``val``): a setting whose BLEU
there falls more than ``--keep`` (0.5) below the recipe's on any run is never
chosen, and among the rest the one with the highest mean BLEU over the other splits
(the joined ones) wins. The evaluations are ``nmt evaluate RUN --split SPLIT --set
...`` (kept in each run as SPLIT@TAG and reused by the next call).

    python benchmarks/tune_decoding.py runs/compare-multi30k-remedies/runs/{global,local_m}/seed1 \\
        --split val --split "val*3" --split "val*5" --json runs/tune-decoding.json

The settings chosen here go into a comparison spec's ``decodings``, which reports
them on the test splits over every seed (docs/results.md, "what fixes it").
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from common import user_errors

from nmt.data.corpus import read_lines
from nmt.data.pipeline import load_split
from nmt.decoding.evaluate import evaluate, read_results
from nmt.decoding.metrics import sentence_stats
from nmt.io.files import write_text
from nmt.setup.config import read_yaml
from nmt.setup.decoding import decode_tag
from nmt.setup.recipe import config_from_dict

# remedy -> its settings (decode.KEY=VALUE overrides); the empty one is the recipe's
GRID: dict[str, list[list[str]]] = {
    "recipe": [[]],
    "coverage": [
        [f"decode.alpha={a}", f"decode.coverage={b}"]
        for a in (0.6, 1.0)
        for b in (0.05, 0.1, 0.2, 0.5)
    ],
    "word_reward": [["decode.alpha=0", f"decode.word_reward={g}"] for g in (0.2, 0.5, 1.0)],
    "min_len": [[f"decode.min_len_a={a}"] for a in (0.5, 0.8)],
}


def length_ratio(hyps: list[str], refs: list[str]) -> float:
    """Hypothesis / reference length in sacreBLEU's 13a tokens (BLEU's brevity)."""
    stats = sentence_stats(hyps, refs)
    return float(stats[:, 0].sum() / max(stats[:, 1].sum(), 1))


@user_errors
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", type=Path, help="run directories (their best.pt)")
    p.add_argument("--split", action="append", required=True, help="dev splits, e.g. 'val*3'")
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--remedy", action="append", choices=list(GRID), help="only these (default: all)"
    )
    p.add_argument(
        "--keep",
        type=float,
        default=0.5,
        help="BLEU a setting may lose on the first split, on any run, and still be chosen",
    )
    p.add_argument("--json", type=Path, help="write every figure here")
    args = p.parse_args()
    if not 0 <= args.keep < 100:
        raise SystemExit(f"error: --keep {args.keep}: give a BLEU difference in [0, 100)")
    table = []
    grid = {k: v for k, v in GRID.items() if not args.remedy or k in ("recipe", *args.remedy)}
    for remedy, settings in grid.items():
        for overrides in settings:
            tag = decode_tag(overrides, "model")
            row = {"remedy": remedy, "set": overrides, "bleu": {}, "length_ratio": {}}
            for run in args.runs:
                done = read_results(run)
                todo = [s for s in args.split if (f"{s}@{tag}" if tag else s) not in done]
                if todo:
                    evaluate(run, todo, args.device, overrides)
                results = read_results(run)
                data = config_from_dict(read_yaml(run / "recipe.yaml")).data
                for split in args.split:
                    name = f"{split}@{tag}" if tag else split
                    refs = load_split(data, split)[1]
                    key = f"{run.parent.name}/{run.name} {split}"
                    row["bleu"][key] = results[name]["bleu"]
                    row["length_ratio"][key] = length_ratio(read_lines(run / f"{name}.hyp"), refs)
            row["mean_bleu"] = float(np.mean(list(row["bleu"].values())))
            table.append(row)
            print(
                f"{remedy:12s} {' '.join(overrides) or '(recipe)':45s} BLEU "
                + "  ".join(f"{v:5.2f}" for v in row["bleu"].values())
                + f"  mean {row['mean_bleu']:5.2f}  ratio "
                + "  ".join(f"{v:.2f}" for v in row["length_ratio"].values())
            )
    chosen = choose(table, args.split, args.keep)
    first, rest = args.split[0], args.split[1:] or args.split
    print(
        f"\nchosen for each remedy: the highest mean BLEU on {', '.join(rest)} among the "
        f"settings within {args.keep} BLEU of the recipe's on {first} for every run:"
    )
    for remedy, row in chosen.items():
        shown = " ".join(row["set"]) if row else "none keeps the first split"
        figure = f"{row['long_bleu']:.2f}" if row else ""
        print(f"  {remedy:12s} {shown or '(recipe)':45s} {figure}")
    if args.json:
        payload = {
            "splits": args.split,
            "keep": args.keep,
            "rows": table,
            "chosen": {k: v and v["set"] for k, v in chosen.items()},
        }
        write_text(args.json, json.dumps(payload, indent=2) + "\n")


def choose(
    table: list[dict[str, Any]], splits: list[str], keep: float
) -> dict[str, dict[str, Any] | None]:
    """Per remedy, the row chosen by the rule of the module's docstring (None where
    every setting loses more than ``keep`` on the first split); each row gains
    ``long_bleu``, its mean BLEU over the splits after the first."""
    first, rest = splits[0], splits[1:] or splits
    recipe = next(r for r in table if r["remedy"] == "recipe")
    for row in table:
        row["long_bleu"] = float(
            np.mean([v for k, v in row["bleu"].items() if k.rsplit(" ", 1)[1] in rest])
        )
    out: dict[str, dict[str, Any] | None] = {}
    for remedy in dict.fromkeys(r["remedy"] for r in table):
        kept = [
            r
            for r in table
            if r["remedy"] == remedy
            and all(
                r["bleu"][k] >= recipe["bleu"][k] - keep
                for k in r["bleu"]
                if k.rsplit(" ", 1)[1] == first
            )
        ]
        out[remedy] = max(kept, key=lambda r: r["long_bleu"]) if kept else None
    return out


if __name__ == "__main__":
    main()
