"""nmt and JoeyNMT 2.3 side by side: the Multi30k de->en reference setup trained by
each for the same wall-clock time, one after the other on the same machine.

JoeyNMT is installed into its own venv by ../shared/bench/joeynmt/setup.sh and run by
run.sh (it stays out of nmt's dependencies). Both report target tokens/s the same way:
the mean over their training-log intervals after the first (validation excluded).
Peak RSS is each training process's maximum resident set.

    python benchmarks/vs_joeynmt.py --seconds 300
    python benchmarks/vs_joeynmt.py --seconds 300 --set train.batch_tokens=4096
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from common import SHARED_MULTI30K

BENCH = SHARED_MULTI30K.parents[1] / "bench" / "joeynmt"
# Runs a command and prints the largest resident set of its process tree (KiB on Linux).
MAXRSS = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:]); "
    "print('maxrss_kb', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def measured(cmd: list[str]) -> tuple[str, float]:
    """Run ``cmd`` under the RSS probe; its output and its peak RSS in MB."""
    out = subprocess.run(
        [sys.executable, "-c", MAXRSS, *cmd], capture_output=True, text=True, check=True
    ).stdout
    rss = float(re.search(r"maxrss_kb (\d+)", out).group(1)) / 1024
    return out, rss


def joeynmt(seconds: int) -> tuple[float, float]:
    subprocess.run(["bash", str(BENCH / "setup.sh")], check=True)
    out, rss = measured(["bash", str(BENCH / "run.sh"), str(seconds)])
    found = re.search(r"joeynmt target tokens/s .*: (\d+)", out)
    if not found:
        sys.exit(f"JoeyNMT printed no throughput (run longer?):\n{out}")
    return float(found.group(1)), rss


def ours(seconds: int, recipe: str, overrides: list[str]) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as run_dir:
        sets = [
            f"data.dir={SHARED_MULTI30K}",
            f"run_dir={run_dir}",
            "data.test=[]",
            "train.max_epochs=null",
            f"train.max_minutes={seconds / 60}",
            "train.valid_every=1000000",  # no validation inside the timed window
            "train.log_every=10",  # as run.sh sets JoeyNMT's logging_freq
            *overrides,
        ]
        cmd = [sys.executable, "-m", "nmt", "train", recipe, "--device", "cpu"]
        _out, rss = measured([*cmd, *[f"--set={s}" for s in sets]])
        lines = (Path(run_dir) / "metrics.jsonl").read_text().splitlines()
        rates = [r["tokens_per_s"] for r in map(json.loads, lines) if "tokens_per_s" in r]
    if len(rates) < 2:
        sys.exit("nmt logged too few intervals: run longer")
    return sum(rates[1:]) / len(rates[1:]), rss


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=int, default=300, help="training time for each")
    p.add_argument("--recipe", default="recipes/multi30k-de-en-40ep.yaml")
    p.add_argument("--set", action="append", default=[], dest="overrides")
    args = p.parse_args()
    if not (SHARED_MULTI30K / "train.de.gz").is_file():
        sys.exit(f"Multi30k not found at {SHARED_MULTI30K}")
    nmt_rate, nmt_rss = ours(args.seconds, args.recipe, args.overrides)
    joey_rate, joey_rss = joeynmt(args.seconds)
    print(f"{args.seconds} s of training each, Multi30k de->en reference setup")
    print(f"{'':10s} {'target tokens/s':>16s} {'peak RSS':>10s}")
    print(f"{'nmt':10s} {nmt_rate:16.0f} {nmt_rss:8.0f} MB   {' '.join(args.overrides)}")
    print(f"{'JoeyNMT':10s} {joey_rate:16.0f} {joey_rss:8.0f} MB")
    print(f"ratio      {nmt_rate / joey_rate:16.2f}x {nmt_rss / joey_rss:9.2f}x")


if __name__ == "__main__":
    main()
