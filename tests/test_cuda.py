"""The CUDA path: every variant on the GPU, bf16 autocast, and a GPU-trained run
that translates on the CPU. Skipped where no CUDA device is present (CI has none);
run on a GPU machine with ``pytest tests/test_cuda.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from nmt.attention import ATTENTION
from nmt.data.vocab import BOS, PAD
from nmt.model.load import load_model
from nmt.training.run import train
from tests.helpers import VOCAB, random_batch, tiny_model

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

CUDA = torch.device("cuda")


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    src = random_batch([9, 5, 12]).to(CUDA)  # (B,S)
    tgt = torch.cat([torch.full((3, 1), BOS), random_batch([10, 7, 10])], 1).to(CUDA)  # (B,T)
    return src, tgt


@pytest.mark.parametrize("kind", ATTENTION.names())
@torch.no_grad()
def test_incremental_equals_full_on_cuda(kind):
    window = {"window": 2} if kind.startswith("local") else {}
    model = tiny_model(kind, **window).to(CUDA).eval()
    src, tgt = _inputs()
    memory, src_mask = model.encode(src)
    full = model.decode(tgt, model.decoder_state(memory, src_mask))
    state = model.decoder_state(memory, src_mask, incremental=True)
    steps = [model.decode(tgt[:, t : t + 1], state) for t in range(tgt.size(1))]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("kind", ATTENTION.names())
def test_bf16_autocast_matches_fp32(kind):
    """The training loss and its gradients under bf16 autocast stay close to fp32
    (parameters and the loss stay fp32; only the matmuls run in bf16)."""
    window = {"window": 2} if kind.startswith("local") else {}
    # Relaxed hard attention: the argmax of eval mode can flip on bf16 rounding.
    options = {"estimator": "gumbel"} if kind == "hard" else {}
    model = tiny_model(kind, **window, **options).to(CUDA).train()
    src, tgt = _inputs()
    gold = random_batch([10, 7, 10]).to(CUDA)  # (B,T-1)
    gold = torch.cat([gold, torch.full((3, 1), PAD, device=CUDA)], 1)  # (B,T)

    def loss_and_grads(autocast: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
        torch.manual_seed(0)
        model.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            logits = model(src, tgt)  # (B,T,V)
        loss = F.cross_entropy(logits.float().flatten(0, 1), gold.flatten(), ignore_index=PAD)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    loss32, grads32 = loss_and_grads(False)
    loss16, grads16 = loss_and_grads(True)
    assert loss16.dtype == torch.float32 and torch.isfinite(loss16)
    assert abs(float(loss16 - loss32)) <= 0.02 * float(loss32)
    flat32, flat16 = (
        torch.cat([g.flatten() for g in grads32]),
        torch.cat([g.flatten() for g in grads16]),
    )
    assert float((flat16 - flat32).norm() / flat32.norm()) < 0.05


def test_trained_on_cuda_translates_on_cpu(tiny_config):
    """A run trained on the GPU (bf16 autocast) reloads on the CPU with the same
    fp32 weights and the same logits."""
    cfg = tiny_config(train={"max_steps": 4, "valid_every": 4})
    train(cfg, device="cuda")
    on_gpu = load_model(cfg.run_dir, CUDA)
    on_cpu = load_model(cfg.run_dir, torch.device("cpu"))
    for p in on_cpu.model.parameters():
        assert p.dtype == torch.float32
    src = random_batch([6, 9])  # (B,S)
    tgt = torch.cat([torch.full((2, 1), BOS), random_batch([5, 5])], 1)  # (B,T)
    assert src.max() < VOCAB <= len(on_cpu.vocabs.src)
    with torch.no_grad():
        cpu = on_cpu.model(src, tgt)
        gpu = on_gpu.model(src.to(CUDA), tgt.to(CUDA)).cpu()
    torch.testing.assert_close(gpu, cpu, atol=1e-4, rtol=1e-3)


def test_a_gpu_is_chosen_by_index_and_an_absent_one_refused():
    from nmt.errors import NmtError
    from nmt.setup.device import resolve_device

    assert resolve_device("cuda:0") == torch.device("cuda", 0)
    count = torch.cuda.device_count()
    with pytest.raises(NmtError, match=f"only {count} CUDA device"):
        resolve_device(f"cuda:{count}")


POSITIONS = {
    "learned": {"kind": "learned"},
    "rope": {"kind": "rope"},
    "alibi": {"kind": "alibi"},
    "relative": {"kind": "relative", "max_distance": 3},
    "cross_alibi": {"cross_alibi": True, "ratio": 1.2},
    "shift": {"shift": 20},
}


@pytest.mark.parametrize("scheme", list(POSITIONS))
@pytest.mark.parametrize("kind", ["global", "local_m", "local_p", "local_s"])
def test_every_position_scheme_trains_and_decodes_on_cuda(kind, scheme):
    """Each model.positions scheme builds its tables and biases on the model's
    device: a bf16 training step gives finite gradients, and decoding step by step
    equals decoding at once on the GPU."""
    window = {"window": 2} if kind.startswith("local") else {}
    model = tiny_model(kind, model={"positions": POSITIONS[scheme]}, **window).to(CUDA)
    src, tgt = _inputs()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model.train()(src, tgt)  # (B,T,V)
    logits.float().sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    model.eval()
    with torch.no_grad():
        memory, src_mask = model.encode(src)
        full = model.decode(tgt, model.decoder_state(memory, src_mask))
        state = model.decoder_state(memory, src_mask, incremental=True)
        steps = [model.decode(tgt[:, t : t + 1], state) for t in range(tgt.size(1))]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-4, rtol=1e-3)


def test_host_syncs_names_each_line_that_waits_for_the_gpu(monkeypatch):
    """benchmarks/vs_reference.py's count of a training step's waits for the GPU."""
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from common import host_syncs

    x = torch.ones(3, device=CUDA)

    def step():
        y = x * 2  # queued: the host goes on
        return float(y.sum()), y.tolist()  # two reads back: two waits

    line = step.__code__.co_firstlineno + 2
    assert host_syncs(step) == [f"test_cuda.py:{line}"] * 2
    assert host_syncs(lambda: x * 2) == []
