"""Data-parallel training (DDP, gloo on 127.0.0.1) equals one process on the same
global batches."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from nmt.io import checkpoint
from nmt.setup.recipe import load_recipe
from nmt.training.run import train
from tests.conftest import subprocess_env, training_until_logged, write_subprocess_recipe

STEPS = 4


def ranks_env(tmp_path: Path) -> dict[str, str]:
    """One thread a rank, and a temporary directory of the test's own as the processes'
    TMPDIR: what a launcher leaves there is seen, and nothing lands in the host's /tmp."""
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {**subprocess_env(), "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path / "tmp")}


def left_in_tmp(tmp_path: Path) -> list[str]:
    """What the processes left in their TMPDIR, but TorchInductor's cache (a cache
    meant to outlive them, which a rank's import of TorchDynamo creates)."""
    names = (p.name for p in (tmp_path / "tmp").iterdir())
    return sorted(n for n in names if not n.startswith("torchinductor_"))


def recipe(toy_dir: Path, run: Path, accumulate: int) -> Path:
    return write_subprocess_recipe(
        toy_dir,
        run,
        model={"dropout": 0.0},
        max_steps=STEPS,
        valid_every=STEPS,
        accumulate=accumulate,
    )


def train_alone(toy_dir: Path, run: Path) -> None:
    """The reference: one process (this one: a process of its own would add only its
    seconds of imports), two batches accumulated per update."""
    train(load_recipe(str(recipe(toy_dir, run, accumulate=2))), device="cpu")


def assert_same_training(single: Path, ddp: Path, ranks: int) -> None:
    """The data-parallel run took the single process's updates: the same steps, tokens
    and parameters (float tolerance), and one RNG state per rank."""
    a = checkpoint.load(single / "last.pt")
    b = checkpoint.load(ddp / "last.pt")
    assert a["state"]["step"] == b["state"]["step"] == STEPS
    assert a["state"]["tokens"] == b["state"]["tokens"]
    assert len(b["rng"]) == ranks
    for name, tensor in a["model"].items():
        other = b["model"][name]
        if name.endswith(("qkv.bias", "k_proj.bias")):
            # Key biases get an analytically zero gradient (a softmax ignores a shift
            # shared by all keys); Adam turns float noise there into steps of about lr.
            keys = (
                slice(tensor.numel() // 3, 2 * tensor.numel() // 3)
                if "qkv" in name
                else slice(None)
            )
            assert (other[keys] - tensor[keys]).abs().max() <= STEPS * 3e-3
            tensor, other = tensor.clone(), other.clone()
            tensor[keys] = other[keys] = 0
        torch.testing.assert_close(other, tensor, atol=1e-5, rtol=1e-4, msg=name)


@pytest.mark.slow
def test_two_ranks_by_nproc_and_by_torchrun_c10d_match_one_process(toy_dir, tmp_path):
    """Two gloo ranks take one process's updates, started by ``nmt train --nproc 2``
    and by ``torchrun --nnodes 2`` with a c10d rendezvous, both "nodes" on this
    machine; there the data cache is prepared once (by the first rank of the first
    node) and read by both. One reference run serves both."""
    env = ranks_env(tmp_path)
    train_alone(toy_dir, tmp_path / "single")
    ddp = recipe(toy_dir, tmp_path / "ddp", accumulate=1)
    done = subprocess.run(
        [sys.executable, "-m", "nmt", "train", str(ddp), "--device", "cpu", "--nproc", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert left_in_tmp(tmp_path) == []  # the launcher's files went with it
    assert_same_training(tmp_path / "single", tmp_path / "ddp", ranks=2)
    # only rank 0 wrote: one training-log record per logged step
    logged = [yaml.safe_load(x)["step"] for x in (tmp_path / "ddp" / "metrics.jsonl").open()]
    assert len(logged) == len(set(logged)) + 1  # training log + validation at the last step

    nodes = recipe(toy_dir, tmp_path / "nodes", accumulate=1)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**env, "NMT_CACHE_DIR": str(tmp_path / "cache")}
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2"]
    torchrun += ["--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-id", "nmt-test"]
    torchrun += ["--rdzv-endpoint", f"127.0.0.1:{port}", "-m", "nmt", "train", str(nodes)]
    started = [
        subprocess.Popen(
            [*torchrun, "--device", "cpu"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [node.communicate(timeout=300)[0] for node in started]
    assert [node.returncode for node in started] == [0, 0], "\n".join(o[-2000:] for o in outputs)
    assert_same_training(tmp_path / "single", tmp_path / "nodes", ranks=2)
    entries = [p for p in (tmp_path / "cache").iterdir() if p.is_dir()]
    assert [p.name[:5] for p in entries if p.name.startswith("data-")] == ["data-"]
    assert sum("preparing" in o for o in outputs) == 1  # one rank encoded the corpus


@pytest.mark.slow
def test_sigterm_to_nmt_train_nproc_reaches_every_rank(toy_dir, tmp_path):
    """A scheduler signals the process it started, not torchrun's ranks: the signal
    is passed on, rank 0 saves last.pt, and no rank is left running."""
    run = tmp_path / "ddp"
    env = ranks_env(tmp_path)
    proc = training_until_logged(toy_dir, run, "--nproc", "2", env=env, start_new_session=True)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err.decode()[-3000:]
    assert checkpoint.load(run / "last.pt")["state"]["step"] >= 1
    assert left_in_tmp(tmp_path) == []
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)  # nothing of the session is left


def ranks_of(launcher: int) -> list[int]:
    """The pids of the processes whose parent is ``launcher`` (torchrun's ranks)."""
    children = Path(f"/proc/{launcher}/task/{launcher}/children")
    return [int(p) for p in children.read_text().split()] if children.exists() else []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"  # not a zombie


@pytest.mark.slow
def test_ranks_stop_when_their_launcher_is_killed_outright(toy_dir, tmp_path):
    """kill -9 of ``nmt train --nproc 2`` passes nothing on: each rank notices that its
    parent is gone, saves last.pt and stops, instead of training on as an orphan."""
    run = tmp_path / "ddp"
    env = ranks_env(tmp_path)
    proc = training_until_logged(toy_dir, run, "--nproc", "2", env=env, start_new_session=True)
    ranks = ranks_of(proc.pid)
    assert len(ranks) == 2, ranks
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.time() + 60
    while any(alive(r) for r in ranks) and time.time() < deadline:
        time.sleep(0.2)
    assert not any(alive(r) for r in ranks)
    assert checkpoint.load(run / "last.pt")["state"]["step"] >= 1


@pytest.mark.slow
def test_a_rank_that_dies_is_named_in_one_line(toy_dir, tmp_path):
    run = tmp_path / "ddp"
    env = ranks_env(tmp_path)
    proc = training_until_logged(toy_dir, run, "--nproc", "2", env=env, start_new_session=True)
    ranks = ranks_of(proc.pid)
    os.kill(ranks[1], signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    text = err.decode()
    assert proc.returncode != 0
    assert "Traceback" not in text, text[-3000:]
    named = [line for line in text.splitlines() if line.startswith("error: rank")]
    assert f"error: rank 1 (pid {ranks[1]}) was killed by signal 9" in named[-1], text[-3000:]
    assert all(len(line) < 300 for line in named)  # the survivor's backend error, in a line
    assert left_in_tmp(tmp_path) == []


def test_an_epoch_of_fewer_batches_than_ranks_is_refused_before_training(tiny_config):
    """Cut to a multiple of the ranks, one batch for two ranks would be an empty epoch,
    and with no epoch budget the trainer counted empty epochs for ever."""
    from nmt.errors import NmtError
    from nmt.training.build import build
    from nmt.training.epochs import EpochPlans

    _, data, cfg = build(tiny_config(train={"batch_tokens": 2**26}), print)
    assert len(EpochPlans(data, cfg, world=1).plan(0)) == 1
    with pytest.raises(
        NmtError,
        match=r"makes 1 batch\(es\) of train.batch_tokens 67,108,864, fewer than the 2 ranks",
    ):
        EpochPlans(data, cfg, world=2).plan(0)


CLOSE_SCRIPT = """
import os, torch
from nmt.training.distributed import from_env
threads = lambda: len(os.listdir("/proc/self/task"))
before = threads()
dist = from_env("cpu")
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(3, 3))
model(torch.ones(2, 3)).sum().backward()
dist.sum([1.0])
del model
dist.close()
print("threads", before, threads())
"""


@pytest.mark.slow  # two rank processes
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_closing_the_group_after_ddp_joins_gloos_threads(tmp_path):
    """A rank that built a DDP module and closed its group has no gloo thread left:
    one that lived on into interpreter shutdown aborted a rank now and then when it
    dropped a finished collective's tensor there (signal 6, 'terminate called
    without an active exception')."""
    script = tmp_path / "close.py"
    script.write_text(CLOSE_SCRIPT)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**subprocess_env(), "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1"}
    env.update(MASTER_PORT=str(port), WORLD_SIZE="2")
    ranks = [  # two ranks started as torchrun would, without its agent
        subprocess.Popen(
            [sys.executable, str(script)],
            env={**env, "RANK": str(rank), "LOCAL_RANK": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    for rank in ranks:
        out, err = rank.communicate(timeout=120)
        assert rank.returncode == 0, err[-2000:]
        before, after = out.split()[1:]
        assert before == after, out
