"""What moves a seed's figures on one machine: the same recipe and seed trained a
few updates under each setting (two as they are, as the control; PyTorch's CPU
kernels for another instruction set; another thread count), and the training
losses of ``metrics.jsonl`` compared to every bit with the first run's; then the
vocabulary the recipe trains, built by each SentencePiece installation given, and
compared with the first one's (pieces, and lines of a split cut the same).

    python benchmarks/reproducibility.py --recipe recipes/multi30k-de-en-10min-adamw.yaml \\
        --set data.dir=../shared/data/multi30k --set data.train_max_words=12 \\
        --sentencepiece .venv/lib/python3.11/site-packages /tmp/sp0.2.0

A SentencePiece installation is a directory that holds the ``sentencepiece``
package, e.g. ``pip install --target /tmp/sp0.2.0 sentencepiece==0.2.0`` (the script
downloads nothing). The figures are in docs/results.md ("What moves a seed's
figures between machines").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import run_child, user_errors

from nmt.errors import NmtError
from nmt.setup.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[1]
# name -> what the environment changes (the control runs twice, unchanged)
SETTINGS = {
    "as is": {},
    "as is, again": {},
    "ATEN_CPU_CAPABILITY=default": {"ATEN_CPU_CAPABILITY": "default"},
    "OMP_NUM_THREADS=2": {"OMP_NUM_THREADS": "2"},
}
# what keeps a short run short: no validation BLEU, no test split
SHORT = ["train.early_stopping=loss", "train.valid_bleu=false", "data.test=[]"]

VOCAB = """
import json, sys
import sentencepiece
from nmt.setup.recipe import load_recipe
from nmt.data.cache import vocab_models
from nmt.data.pipeline import split_files
cfg = load_recipe(sys.argv[1], json.loads(sys.argv[2])).data
(model,) = vocab_models(cfg, split_files(cfg, cfg.train), lambda line: None).values()
open(sys.argv[3], "wb").write(model)
print(sentencepiece.__version__)
"""


def losses(recipe: str, overrides: list[str], steps: int, env: dict[str, str], run: Path):
    """The training losses (step -> loss) of ``steps`` updates under ``env``."""
    sets = [*overrides, f"train.max_steps={steps}", f"train.warmup={steps // 3}", *SHORT]
    sets += [f"train.log_every={max(steps // 6, 1)}", f"run_dir={run}"]
    command = [sys.executable, "-m", "nmt", "train", recipe, "--device", "cpu"]
    command += [a for s in sets for a in ("--set", s)]
    base = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    run_child(command, env={**base, **env}, stdout=subprocess.DEVNULL)
    records = [json.loads(line) for line in (run / "metrics.jsonl").open(encoding="utf-8")]
    return {r["step"]: r["loss"] for r in records if "loss" in r}


def vocabulary(recipe: str, overrides: list[str], install: Path, out: Path) -> str:
    """Train the recipe's (joint) vocabulary with the SentencePiece of ``install``, as
    nmt trains it, into a data cache of its own next to ``out``; its version."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(install), str(ROOT)])}
    cached = [*overrides, f"data.cache_dir={out.with_suffix('.cache')}"]
    command = [sys.executable, "-c", VOCAB, recipe, json.dumps(cached), str(out)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def compare_vocabularies(models: dict[str, Path], lines: list[str]) -> None:
    """Each vocabulary against the first: its pieces the first lacks, and the lines of
    ``lines`` it cuts as the first does."""
    import sentencepiece as spm

    procs = {v: spm.SentencePieceProcessor(model_file=str(p)) for v, p in models.items()}
    pieces = {v: {p.id_to_piece(i) for i in range(p.get_piece_size())} for v, p in procs.items()}
    first = next(iter(procs))
    print("\n| SentencePiece | pieces | not in the first's | lines cut as the first cuts |")
    print("| --- | ---: | ---: | ---: |")
    for v, proc in procs.items():
        same = sum(
            proc.encode(x, out_type=str) == procs[first].encode(x, out_type=str) for x in lines
        )
        new = len(pieces[v] - pieces[first])
        print(f"| {v} | {len(pieces[v])} | {new} | {same} of {len(lines)} |")


@user_errors
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", default="recipes/multi30k-de-en-10min-adamw.yaml")
    ap.add_argument("--set", action="append", default=[], dest="overrides")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--sentencepiece", nargs="*", type=Path, default=[])
    args = ap.parse_args()
    cfg = load_recipe(args.recipe, args.overrides)  # a bad recipe or key fails here
    if args.sentencepiece and not cfg.data.vocab.joint:
        raise NmtError("--sentencepiece: compares joint vocabularies (data.vocab.joint: true)")
    with tempfile.TemporaryDirectory() as tmp:
        found = {
            n: losses(args.recipe, args.overrides, args.steps, e, Path(tmp, f"r{i}"))
            for i, (n, e) in enumerate(SETTINGS.items())
        }
        first = next(iter(found.values()))
        print(f"| setting | {' | '.join(f'loss at {s}' for s in first)} | the same as the first |")
        print(f"| --- |{' ---: |' * len(first)} --- |")
        for name, curve in found.items():
            cells = " | ".join(f"{loss:.7f}" for loss in curve.values())
            print(f"| {name} | {cells} | {'every bit' if curve == first else 'no'} |")
        models = {}
        for i, install in enumerate(args.sentencepiece):
            out = Path(tmp, f"spm{i}.model")
            models[f"{vocabulary(args.recipe, args.overrides, install, out)} ({install})"] = out
        if models:
            from nmt.data.pipeline import load_split

            compare_vocabularies(models, load_split(cfg.data, cfg.data.dev)[0])


if __name__ == "__main__":
    main()
