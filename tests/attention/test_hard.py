"""Hard attention: argmax at inference; estimators; REINFORCE is unbiased."""

from __future__ import annotations

import pytest
import torch

from nmt.attention.base import Context, merge_heads, split_heads
from nmt.attention.hard import Reinforce
from nmt.data.vocab import PAD
from nmt.setup.config import ConfigError
from nmt.training.objective import attention_loss
from tests.attention.test_attention import D, build, global_twin, inputs
from tests.helpers import random_batch, tiny_model


def test_argmax_context_is_the_value_at_the_argmax():
    attn = build("hard")
    query, memory, src_mask, pos = inputs((9, 4), 5)
    mem = attn.project_memory(memory, src_mask)
    out = attn(query, mem, Context(pos, need_weights=True))
    best = out.weights.argmax(-1)  # (B,H,T)
    value = mem.value.gather(2, best.unsqueeze(-1).expand(-1, -1, -1, mem.value.size(-1)))
    expected = attn.out_proj(merge_heads(value))
    torch.testing.assert_close(out.context, expected)
    assert (best[1] < 4).all()  # never a padding position


@pytest.mark.parametrize("estimator", ["reinforce", "straight_through", "gumbel"])
def test_estimators_give_score_gradients(estimator):
    attn = build("hard", estimator=estimator).train()
    query, memory, src_mask, pos = inputs((9, 4), 5)
    out = attn(query, attn.project_memory(memory, src_mask), Context(pos))
    loss = out.context.pow(2).sum()
    if estimator == "reinforce":
        reward = -out.context.pow(2).sum(2).detach()  # (B,T)
        extra, stats = out.loss.total([out.loss], reward, torch.ones(2, 5, dtype=torch.bool))
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
        alpha = attn.eval()(query, mem, Context(pos, need_weights=True)).weights[0, 0, 0]
        picks = []
        attn.train()
        original = torch.nn.functional.one_hot

        def spy(t, n):
            picks.append(t.clone())
            return original(t, n)

        torch.nn.functional.one_hot = spy
        try:
            attn(query, mem, Context(pos))
        finally:
            torch.nn.functional.one_hot = original
    freq = torch.bincount(picks[0][:, 0, 0], minlength=6).float() / 4000
    assert (freq[3:] == 0).all()
    torch.testing.assert_close(freq, alpha, atol=0.03, rtol=0)


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
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
    alpha = attn.eval()(query, mem, Context(pos, need_weights=True)).weights[0]  # (H,T,S)
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
    out = attn(query.expand(N, -1, -1), mem, Context(pos))
    loss = loss_of(out.context)  # (N,T)
    surrogate, _ = out.loss.total([out.loss], -loss.detach(), torch.ones(N, T, dtype=torch.bool))
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
    assert estimator != "gumbel" or attn.temperature(100) == pytest.approx(0.05)
    query, memory, src_mask, pos = inputs((9, 4), 5)
    src_mask[1] = False
    out = attn(query, attn.project_memory(memory, src_mask), Context(pos, update=100))
    assert torch.isfinite(out.context).all()
    torch.testing.assert_close(out.context[1], attn.out_proj.bias.expand(5, D))


def test_gumbel_temperature_anneals_by_update_not_by_forward():
    """τ is read from the update the context carries: forward calls within one update
    (scheduled sampling's passes, accumulated micro-batches) draw at the same τ, and
    nothing in the module counts them."""
    attn = build("hard", estimator="gumbel", tau=1.0, tau_min=0.01, anneal=0.1).train()
    assert attn.temperature(3) == pytest.approx(torch.exp(torch.tensor(-0.3)).item())
    assert attn.temperature(10**6) == pytest.approx(0.01)
    query, memory, src_mask, pos = inputs((9, 4), 5)
    mem = attn.project_memory(memory, src_mask)

    def drawn(update):
        torch.manual_seed(0)
        return attn(query, mem, Context(pos, update=update)).context

    first = drawn(3)
    for _ in range(3):
        torch.testing.assert_close(drawn(3), first)
    assert not torch.allclose(drawn(40), first)  # a colder τ: sharper weights
    assert not any(b.dtype == torch.long for b in attn.buffers())


@pytest.mark.parametrize("estimator", ["reinforce", "straight_through", "gumbel"])
def test_each_head_of_each_training_query_takes_one_real_source_value(estimator):
    """With out_proj the identity, every head's slice of the context is the value of
    one real source position (Gumbel at τ = 10⁻⁶, a near-one-hot relaxation): one
    choice per (batch, head, query), over source positions, never over heads."""
    torch.manual_seed(0)
    cold = {"tau": 1e-6, "tau_min": 1e-6} if estimator == "gumbel" else {}
    attn = build("hard", estimator=estimator, **cold).train()
    with torch.no_grad():
        attn.out_proj.weight.copy_(torch.eye(D))
        attn.out_proj.bias.zero_()
    query, memory, src_mask, pos = inputs((9, 4), 5)
    mem = attn.project_memory(memory, src_mask)
    heads = split_heads(attn(query, mem, Context(pos)).context, attn.heads)  # (B,H,T,Dh)
    for b, length in enumerate((9, 4)):
        gap = (heads[b].unsqueeze(2) - mem.value[b, :, None, :length]).abs().amax(-1)
        assert (gap.amin(-1) < 1e-4).all()  # (H,T): some real position's value


def test_straight_through_passes_the_softmax_gradient_back():
    """Forward one-hot, backward as the soft context: for a loss linear in the context
    the gradient is global attention's with the same projections (Bengio et al. 2013)."""
    torch.manual_seed(0)
    attn = build("hard", estimator="straight_through").train()
    glob = global_twin(attn).train()
    query, memory, src_mask, pos = inputs((9, 4), 5)
    direction = torch.randn(2, 5, D)
    for module in (attn, glob):
        context = module(query, module.project_memory(memory, src_mask), Context(pos)).context
        (context * direction).sum().backward()
    torch.testing.assert_close(attn.q_proj.weight.grad, glob.q_proj.weight.grad)
    torch.testing.assert_close(attn.k_proj.weight.grad, glob.k_proj.weight.grad)


def entropy_of(alpha):  # (B,H,T,S) -> (B,H,T), 0·log 0 = 0
    return -(alpha * torch.log(alpha.clamp(min=1e-30))).sum(-1)


def test_reinforce_loss_is_minus_reward_to_go_times_log_prob_minus_the_entropy_bonus():
    """The loss written out from the module docstring, on a batch with a padded target:
    −Σ A_t·log α_t(ŝ_t) − λ_e·Σ H(α_t), A_t = Σ_{t'≥t} (r_t' − b) over real tokens;
    and the logged reward, baseline (b ← 0.9·b + 0.1·mean r) and mean entropy."""
    torch.manual_seed(0)
    attn = build("hard", estimator="reinforce", entropy_weight=0.3).train()
    query, memory, src_mask, pos = inputs((9, 4), 5)
    out = attn(query, attn.project_memory(memory, src_mask), Context(pos, need_weights=True))
    alpha = out.weights  # (B,H,T,S)
    sampled = out.loss.log_prob.exp().unsqueeze(-1)  # α at each sampled position
    assert torch.isclose(alpha, sampled).any(-1).all()
    m = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)
    reward = torch.randn(2, 5) * m
    attn.baseline.fill_(-0.4)
    loss, stats = out.loss.total([out.loss], reward, m)
    centred = (reward + 0.4) * m
    to_go = torch.stack([centred[:, t:].sum(-1) for t in range(5)], -1)  # (B,T)
    surrogate = -(to_go.unsqueeze(1) * out.loss.log_prob * m.unsqueeze(1)).sum()
    entropy = (entropy_of(alpha) * m.unsqueeze(1)).sum()
    torch.testing.assert_close(loss, surrogate - 0.3 * entropy)
    mean_reward = float(reward.sum() / 8)
    assert stats["reward"] == pytest.approx(mean_reward)
    assert stats["baseline"] == pytest.approx(0.9 * -0.4 + 0.1 * mean_reward)
    assert stats["entropy"] == pytest.approx(float(entropy.detach()) / (8 * alpha.size(1)))


def test_the_baseline_starts_at_the_first_reward_then_moves_by_its_decay():
    attn = build("hard", estimator="reinforce", baseline_decay=0.8).train()
    query, memory, src_mask, pos = inputs((9, 4), 5)
    out = attn(query, attn.project_memory(memory, src_mask), Context(pos))
    m = torch.ones(2, 5, dtype=torch.bool)
    out.loss.total([out.loss], torch.full((2, 5), -3.0), m)
    assert float(attn.baseline) == pytest.approx(-3.0)
    out.loss.total([out.loss], torch.full((2, 5), -1.0), m)
    assert float(attn.baseline) == pytest.approx(0.8 * -3.0 + 0.2 * -1.0)


def test_expected_prob_one_gives_soft_contexts_and_no_policy_term():
    """Xu et al.'s variance trick at probability 1: every context is the expected one
    (global attention's, with the same projections), and no sample has a log-prob."""
    attn = build("hard", estimator="reinforce", expected_prob=1.0).train()
    glob = global_twin(attn)
    query, memory, src_mask, pos = inputs((9, 4), 5)
    out = attn(query, attn.project_memory(memory, src_mask), Context(pos))
    soft = glob(query, glob.project_memory(memory, src_mask), Context(pos)).context
    torch.testing.assert_close(out.context, soft)
    assert (out.loss.log_prob == 0).all()


def test_expected_prob_chooses_soft_contexts_at_that_rate():
    torch.manual_seed(0)
    attn = build("hard", estimator="reinforce", expected_prob=0.3).train()
    query, memory, src_mask, pos = inputs((9, 4), 5)
    query, memory, src_mask = (x.repeat(200, 1, 1) for x in (query, memory, src_mask))
    out = attn(query, attn.project_memory(memory, src_mask), Context(pos))
    assert float((out.loss.log_prob == 0).float().mean()) == pytest.approx(0.3, abs=0.02)


@pytest.mark.parametrize(
    ("estimator", "options", "refused"),
    [
        ("reinforce", {"baseline_decay": 0.0}, None),
        ("reinforce", {"baseline_decay": 1.0}, "baseline_decay"),
        ("reinforce", {"baseline_decay": -0.1}, "baseline_decay"),
        ("reinforce", {"expected_prob": 0.0}, None),
        ("reinforce", {"expected_prob": 1.0}, None),
        ("reinforce", {"expected_prob": 1.01}, "expected_prob"),
        ("reinforce", {"entropy_weight": 0.0}, None),
        ("reinforce", {"entropy_weight": -0.01}, "entropy_weight"),
        ("gumbel", {"tau": 0.5, "tau_min": 0.5}, None),
        ("gumbel", {"tau": 0.5, "tau_min": 0.6}, "tau_min"),
        ("gumbel", {"tau_min": 0.0}, "tau_min"),
        ("gumbel", {"anneal": 0.0}, None),
        ("gumbel", {"anneal": -1e-4}, "anneal"),
    ],
)
def test_estimator_settings_are_accepted_up_to_their_bounds(estimator, options, refused):
    if refused is None:
        build("hard", estimator=estimator, **options)
    else:
        with pytest.raises(ConfigError, match=refused):
            build("hard", estimator=estimator, **options)


def test_the_objective_sums_each_layers_loss_and_averages_its_statistics():
    """attention_loss: the REINFORCE terms that came up with every decoder layer's
    outputs add up; each logged ``attn_*`` figure is the mean of the layers' own."""
    torch.manual_seed(0)
    model = tiny_model("hard", estimator="reinforce").train()
    src, tgt = random_batch([5, 7]), random_batch([4, 6])
    _, attention = model.states(src, tgt)
    mask, reward = tgt != PAD, -torch.rand(tgt.shape)
    baselines = [float(layer.cross_attn.baseline) for layer in model.decoder]
    loss, stats = attention_loss(attention, reward, mask)
    for layer, start in zip(model.decoder, baselines):  # each term moved its baseline
        layer.cross_attn.baseline.fill_(start)
    layers = [calls[0].loss.total([calls[0].loss], reward, mask) for calls in attention]
    torch.testing.assert_close(loss, sum(layer_loss for layer_loss, _ in layers))
    assert len(layers) == 2 and stats.keys() == {f"attn_{k}" for k in layers[0][1]}
    for k in layers[0][1]:
        assert stats[f"attn_{k}"] == pytest.approx(sum(s[k] for _, s in layers) / 2)


def test_the_first_updates_baseline_does_not_depend_on_the_sentences_own_reward():
    """Before any average exists, sentence b's baseline is the mean per-token reward
    of the other sentences: raising b's own reward at token t raises its reward to
    go by exactly that much (a baseline moving with it would take part back), and
    the other sentences' advantages move by the shift of their leave-one-out mean."""
    torch.manual_seed(0)
    attn = build("hard", estimator="reinforce", entropy_weight=0.0).train()
    query, memory, src_mask, pos = inputs((9, 4), 5)
    out = attn(query, attn.project_memory(memory, src_mask), Context(pos))
    log_prob = out.loss.log_prob.detach().requires_grad_()
    m = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)
    reward = -torch.rand(2, 5) * m

    def to_go(reward):  # −∂loss/∂log α summed over heads: (B,T) advantages
        chosen = Reinforce(log_prob, out.loss.entropy, attn.baseline.clone(), attn.cfg)
        loss, stats = chosen.total([chosen], reward, m)
        (grad,) = torch.autograd.grad(loss, log_prob)
        return -grad[:, 0], stats

    base, stats = to_go(reward)
    raised = reward.clone()
    raised[0, 2] += 1.0
    moved, _ = to_go(raised)
    torch.testing.assert_close(moved[0] - base[0], torch.tensor([1.0, 1, 1, 0, 0]))
    # sentence 1's baseline, sentence 0's mean, rose by 1/5 on each of its 3 tokens
    torch.testing.assert_close(moved[1] - base[1], torch.tensor([-3.0, -2, -1, 0, 0]) / 5)
    assert stats["baseline"] == pytest.approx(float((reward * m).sum() / 8))  # the average's start
