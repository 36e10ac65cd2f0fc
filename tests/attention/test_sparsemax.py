"""Sparsemax is the Euclidean projection onto the simplex: on the simplex, closer
to the scores than any other point of it, sparse, and differentiable."""

from __future__ import annotations

import pytest
import torch

from nmt.attention.base import Context
from nmt.attention.sparsemax import SparsemaxAttention, sparsemax
from tests.helpers import attention_config


def random_case(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    scores = 3 * torch.randn(6, 9, generator=g, dtype=torch.float64)
    mask = torch.rand(6, 9, generator=g) > 0.3
    mask[:, 0] = True
    return scores, mask


@pytest.mark.parametrize("seed", range(5))
def test_weights_lie_on_the_simplex_of_real_positions(seed):
    scores, mask = random_case(seed)
    p = sparsemax(scores, mask)
    assert (p >= 0).all() and (p[~mask] == 0).all()
    torch.testing.assert_close(p.sum(-1), torch.ones(6, dtype=torch.float64))


@pytest.mark.parametrize("seed", range(5))
def test_no_point_of_the_simplex_is_closer_to_the_scores(seed):
    """Projection: ‖p − z‖ ≤ ‖q − z‖ for random q on the simplex of real positions."""
    scores, mask = random_case(seed)
    p = sparsemax(scores, mask)
    g = torch.Generator().manual_seed(100 + seed)
    for _ in range(200):
        q = torch.rand(6, 9, generator=g, dtype=torch.float64).pow(4) * mask
        q = q / q.sum(-1, keepdim=True)
        closer = ((p - scores) * mask).norm(dim=-1) <= ((q - scores) * mask).norm(dim=-1) + 1e-12
        assert closer.all()


def test_a_clear_winner_takes_all_and_ties_share():
    mask = torch.ones(1, 4, dtype=torch.bool)
    assert sparsemax(torch.tensor([[5.0, 1.0, 0.0, -2.0]]), mask).tolist() == [[1, 0, 0, 0]]
    torch.testing.assert_close(
        sparsemax(torch.tensor([[2.0, 2.0, -5.0, -5.0]]), mask), torch.tensor([[0.5, 0.5, 0, 0]])
    )


def test_a_row_without_real_positions_gets_zeros():
    p = sparsemax(torch.randn(2, 5), torch.zeros(2, 5, dtype=torch.bool))
    assert torch.equal(p, torch.zeros(2, 5))


def test_gradient_is_the_projection_jacobian():
    """Martins & Astudillo 2016, Proposition 2: J = diag(s) − s sᵀ / |S|."""
    scores, mask = random_case(7)
    scores.requires_grad_(True)
    p = sparsemax(scores, mask)
    for row in range(6):
        (jac_row,) = torch.autograd.grad(p[row, 0], scores, retain_graph=True)
        s = (p[row] > 0).double()
        want = (s[0] * (torch.arange(9) == 0).double() - s[0] * s / s.sum()) * mask[row]
        torch.testing.assert_close(jac_row[row], want)


def test_weights_sum_to_one_under_bf16_autocast():
    """bf16 autocast (the default precision on CUDA) hands the layer bf16 scores;
    the projection still runs in float32, so every row sums to 1."""
    torch.manual_seed(0)
    layer = SparsemaxAttention(attention_config("sparsemax"), 64, 4, 0.0)
    query, memory = 4 * torch.randn(8, 20, 64), 4 * torch.randn(8, 30, 64)
    mask = torch.ones(8, 1, 30, dtype=torch.bool)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        keys = layer.project_memory(memory, mask)
        attended = layer(query, keys, Context(torch.arange(20), need_weights=True))
    assert attended.weights.dtype == torch.float32
    torch.testing.assert_close(attended.weights.sum(-1), torch.ones(8, 4, 20), atol=1e-5, rtol=0)
