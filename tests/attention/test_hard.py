"""Hard attention: argmax at inference; estimators; REINFORCE is unbiased."""

from __future__ import annotations

import pytest
import torch

from tests.attention.test_attention import D, build, inputs


def test_argmax_context_is_the_value_at_the_argmax():
    attn = build("hard")
    query, memory, src_mask, pos = inputs((9, 4), 5)
    mem = attn.project_memory(memory, src_mask)
    out = attn(query, mem, src_mask, pos, need_weights=True)
    best = out.weights.argmax(-1)  # (B,H,T)
    value = mem.value.gather(2, best.unsqueeze(-1).expand(-1, -1, -1, mem.value.size(-1)))
    expected = attn.out_proj(attn.merge(value))
    torch.testing.assert_close(out.context, expected)
    assert (best[1] < 4).all()  # never a padding position


@pytest.mark.parametrize("estimator", ["reinforce", "straight_through", "gumbel"])
def test_estimators_give_score_gradients(estimator):
    attn = build("hard", estimator=estimator).train()
    query, memory, src_mask, pos = inputs((9, 4), 5)
    out = attn(query, attn.project_memory(memory, src_mask), src_mask, pos)
    loss = out.context.pow(2).sum()
    if estimator == "reinforce":
        reward = -out.context.pow(2).sum(2).detach()  # (B,T)
        extra, stats = attn.extra_loss([out], reward, torch.ones(2, 5, dtype=torch.bool))
        loss = loss + extra
        assert set(stats) == {"reward", "baseline", "entropy"}
    loss.backward()
    assert attn.q_proj.weight.grad.abs().sum() > 0


def test_samples_follow_alpha_and_avoid_padding():
    torch.manual_seed(0)
    attn = build("hard", estimator="straight_through").train()
    query, memory, src_mask, pos = inputs((6, 3), 1)
    query, memory, src_mask = (x[1:].expand(4000, *x.shape[1:]) for x in (query, memory, src_mask))
    mem = attn.project_memory(memory, src_mask)
    with torch.no_grad():
        alpha = attn.eval()(query, mem, src_mask, pos, need_weights=True).weights[0, 0, 0]
        picks = []
        attn.train()
        original = torch.nn.functional.one_hot

        def spy(t, n):
            picks.append(t.clone())
            return original(t, n)

        torch.nn.functional.one_hot = spy
        try:
            attn(query, mem, src_mask, pos)
        finally:
            torch.nn.functional.one_hot = original
    freq = torch.bincount(picks[0][:, 0, 0], minlength=6).float() / 4000
    assert (freq[3:] == 0).all()
    torch.testing.assert_close(freq, alpha, atol=0.03, rtol=0)


@pytest.mark.parametrize("T", [1, 2])
def test_reinforce_matches_the_exact_gradient(T):
    """T queries over S source positions; each query's loss depends on its own
    context. The expected loss sum_t sum_s alpha_ts L_t(s) can be enumerated (every
    head samples independently); the mean REINFORCE gradient over many samples, with
    per-token rewards turned into rewards to go, must match its gradient w.r.t. the
    query projection (which moves alpha only)."""
    torch.manual_seed(0)
    S, N = 4 if T == 1 else 3, 40000
    attn = build("hard", estimator="reinforce", entropy_weight=0.0)
    query, memory, src_mask, pos = inputs((S,), T)
    targets = torch.randn(T, D)

    def loss_of(context):  # (..., T, D) -> (..., T)
        return (context - targets).pow(2).sum(-1)

    # exact: enumerate the joint choice of the H heads, separately for each query
    mem = attn.project_memory(memory, src_mask)
    alpha = attn.eval()(query, mem, src_mask, pos, need_weights=True).weights[0]  # (H,T,S)
    H = alpha.size(0)
    grid = torch.cartesian_prod(*[torch.arange(S)] * H).view(-1, H)  # (S^H,H)
    values = mem.value[0].detach()  # (H,S,Dh)
    chosen = torch.stack([values[h, grid[:, h]] for h in range(H)], 1)  # (S^H,H,Dh)
    contexts = attn.out_proj(chosen.reshape(len(grid), -1)).detach()  # (S^H,D)
    losses = loss_of(contexts.unsqueeze(1))  # (S^H,T)
    joint = torch.stack([alpha[h, :, grid[:, h]] for h in range(H)], 0).prod(0)  # (T,S^H)
    attn.zero_grad()
    expected_loss = (joint * losses.T).sum()
    expected_loss.backward()
    exact = attn.q_proj.weight.grad.clone()
    # A constant baseline per token leaves the estimator unbiased and cuts its variance.
    attn.baseline.fill_(-float(expected_loss.detach()) / T)

    # REINFORCE over N independent samples of the same problem
    attn.zero_grad()
    attn.train()
    mem = attn.project_memory(memory.expand(N, -1, -1), src_mask.expand(N, -1, -1))
    out = attn(query.expand(N, -1, -1), mem, src_mask.expand(N, -1, -1), pos)
    loss = loss_of(out.context)  # (N,T)
    surrogate, _ = attn.extra_loss([out], -loss.detach(), torch.ones(N, T, dtype=torch.bool))
    (surrogate / N).backward()
    estimate = attn.q_proj.weight.grad
    error = (estimate - exact).norm() / exact.norm()
    assert error < 0.06, f"relative error {error:.3f}"


@pytest.mark.parametrize("estimator", ["reinforce", "straight_through", "gumbel"])
def test_training_on_a_row_without_source_gives_zeros_at_low_temperature(estimator):
    """Every estimator, in training, with Gumbel's τ annealed far below 1: a sentence
    with no real source position gets a zero context (out_proj's bias), not NaN."""
    cold = {"tau": 1.0, "tau_min": 0.05, "anneal": 1.0} if estimator == "gumbel" else {}
    attn = build("hard", estimator=estimator, **cold).train()
    attn.start_update(100)
    assert estimator != "gumbel" or attn.temperature() == pytest.approx(0.05)
    query, memory, src_mask, pos = inputs((9, 4), 5)
    src_mask[1] = False
    out = attn(query, attn.project_memory(memory, src_mask), src_mask, pos)
    assert torch.isfinite(out.context).all()
    torch.testing.assert_close(out.context[1], attn.out_proj.bias.expand(5, D))


def test_gumbel_temperature_anneals_by_update_not_by_forward():
    attn = build("hard", estimator="gumbel", tau=1.0, tau_min=0.01, anneal=0.1).train()
    query, memory, src_mask, pos = inputs((9, 4), 5)
    mem = attn.project_memory(memory, src_mask)
    attn.start_update(3)
    for _ in range(4):  # e.g. scheduled sampling's passes or accumulated micro-batches
        attn(query, mem, src_mask, pos)
    assert attn.temperature() == pytest.approx(torch.exp(torch.tensor(-0.3)).item())
