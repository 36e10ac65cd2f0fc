"""The written-out attention that CPU training with dropout takes agrees with
PyTorch's kernel under every kind of mask, and its dropout keeps the expectation."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from nmt.attention.fused import fused_attention, written_out


def qkv(L=5, t=7):
    torch.manual_seed(0)
    return torch.randn(2, 3, L, 8), torch.randn(2, 3, t, 8), torch.randn(2, 3, t, 8)


def masks(L=5, t=7):
    boolean = torch.rand(2, 1, L, t) > 0.3
    boolean[0, :, 1] = False  # a row that sees nothing (two-stream's first query does)
    bias = torch.zeros(2, 1, 1, t).masked_fill(torch.arange(t) >= 5, torch.finfo().min)
    return {"none": None, "boolean": boolean, "bias": bias}


@pytest.mark.parametrize("kind", ["none", "boolean", "bias"])
@pytest.mark.parametrize("causal", [False, True])
def test_written_out_equals_the_kernel(kind, causal):
    q, k, v = qkv()
    mask = masks()[kind]
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
    got = written_out(q, k, v, mask, causal, dropout_p=0.0)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_cpu_dropout_keeps_the_expected_context():
    q, k, v = qkv()
    mask = masks()["bias"]
    want = fused_attention(q, k, v, attn_mask=mask)
    torch.manual_seed(1)
    runs = torch.stack([fused_attention(q, k, v, mask, dropout_p=0.3) for _ in range(4000)])
    assert not torch.equal(runs[0], runs[1])
    torch.testing.assert_close(runs.mean(0), want, atol=0.05, rtol=0.05)
