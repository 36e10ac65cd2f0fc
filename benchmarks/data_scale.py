"""How the data cache scales: prepare time, size on disk, start-up and memory.

Synthetic corpora are Multi30k's training set repeated (no download): for each
size, ``nmt data prepare`` on recipes/multi30k-de-en-40ep.yaml (a fresh cache), then
``nmt train`` for two updates on the prepared cache, once alone and once as 2
data-parallel ranks. Printed per size: time to prepare, the entry's size on
disk, seconds from ``nmt train``'s start to its first update (when
``metrics.jsonl`` gets its first line), and the peak resident memory (VmHWM) of
the training process and of each rank, with the file-backed part (the mapped
corpus, shared between ranks) beside it.

    python benchmarks/data_scale.py --sizes 29000 1000000 4500000 --work /tmp/scale
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from common import SHARED_MULTI30K

ROOT = Path(__file__).resolve().parents[1]


def write_corpus(source: Path, out: Path, pairs: int) -> None:
    """train.{de,en}: Multi30k's training pairs repeated up to ``pairs``; val as is."""
    out.mkdir(parents=True, exist_ok=True)
    for lang in ("de", "en"):
        lines = gzip.open(source / f"train.{lang}.gz", "rt", encoding="utf-8").read().splitlines()
        with open(out / f"train.{lang}", "w", encoding="utf-8") as f:
            for start in range(0, pairs, len(lines)):
                f.write("\n".join(lines[: pairs - start]) + "\n")
        shutil.copy(source / f"val.{lang}.gz", out / f"val.{lang}.gz")


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return found


def memory(pid: int) -> dict[str, int] | None:
    """VmHWM, RssAnon and RssFile of a process, in MB; None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            status = dict(line.split(":", 1) for line in f)
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    launcher = b"--nproc" in cmdline or b"torch.distributed.run" in cmdline
    if b"python" not in cmdline or launcher:  # the training processes, not their launchers
        return None
    kb = {k: int(status[k].split()[0]) for k in ("VmHWM", "RssAnon", "RssFile")}
    return {k: v // 1024 for k, v in kb.items()}


def run_training(cmd: list[str], run_dir: Path, env: dict[str, str]) -> dict[str, object]:
    """Run ``cmd``; seconds to the first metrics line, and each training process's
    last-seen memory (VmHWM only grows, so the last reading is its peak)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    first_update, seen = None, {}
    while proc.poll() is None:
        if first_update is None and (run_dir / "metrics.jsonl").is_file():
            first_update = time.perf_counter() - start
        for pid in descendants(proc.pid):
            if (m := memory(pid)) is not None:
                seen[pid] = m
        time.sleep(0.1)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr.read().decode()[-2000:]}")
    return {"first_update_s": first_update, "processes": list(seen.values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[29_000, 1_000_000, 4_500_000])
    parser.add_argument("--work", type=Path, default=Path("/tmp/nmt-data-scale"))
    parser.add_argument("--data", type=Path, default=SHARED_MULTI30K)
    parser.add_argument("--skip-ddp", action="store_true")
    args = parser.parse_args()
    nmt = [sys.executable, "-m", "nmt"]
    recipe = str(ROOT / "recipes" / "multi30k-de-en-40ep.yaml")
    rows = []
    for pairs in args.sizes:
        work = args.work / str(pairs)
        shutil.rmtree(work, ignore_errors=True)
        write_corpus(args.data, work / "corpus", pairs)
        env = {**os.environ, "NMT_CACHE_DIR": str(work / "cache")}
        sets = [f"--set=data.dir={work / 'corpus'}", "--set=data.test=[]"]
        start = time.perf_counter()
        out = subprocess.run(
            [*nmt, "data", "prepare", recipe, *sets], env=env, capture_output=True, text=True
        )
        if out.returncode != 0:
            sys.exit(out.stderr[-2000:])
        prepare_s = time.perf_counter() - start
        entry = Path(out.stdout.split(" in ")[-1].strip())
        disk_mb = sum(f.stat().st_size for f in entry.iterdir()) / 2**20
        row = {"pairs": pairs, "prepare_s": prepare_s, "disk_mb": disk_mb}
        budget = ["--set=train.max_steps=2", "--set=train.log_every=1", "--device=cpu"]
        budget += ["--set=train.valid_bleu=false", "--set=train.early_stopping=loss"]
        for name, extra in [("single", []), ("ddp2", ["--nproc", "2"])]:
            if name == "ddp2" and args.skip_ddp:
                continue
            run_dir = work / f"run-{name}"
            cmd = [*nmt, "train", recipe, *sets, f"--set=run_dir={run_dir}", *budget, *extra]
            row[name] = run_training(cmd, run_dir, env)
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(
        "\n| pairs | prepare (s) | on disk (MB) | start to 1st update (s) | peak RSS (MB) "
        "| 2 ranks: peak RSS each (MB), of it file-backed |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        single = r["single"]["processes"]
        ranks = r.get("ddp2", {}).get("processes", [])
        each = ", ".join(f"{p['VmHWM']} ({p['RssFile']})" for p in ranks) or "-"
        print(
            f"| {r['pairs']:,} | {r['prepare_s']:.0f} | {r['disk_mb']:.0f} "
            f"| {r['single']['first_update_s']:.1f} | {max(p['VmHWM'] for p in single)} | {each} |"
        )


if __name__ == "__main__":
    main()
