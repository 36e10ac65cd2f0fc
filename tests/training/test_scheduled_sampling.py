"""Two-pass scheduled sampling: schedules, the mix, gradients, every attention variant."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from nmt.attention import ATTENTION
from nmt.data.vocab import PAD
from nmt.errors import NmtError
from nmt.setup.training import ScheduledSamplingConfig
from nmt.training.run import prepare, train
from nmt.training.scheduled_sampling import gold_probability, prediction_embeddings


@pytest.mark.parametrize("schedule", ["linear", "exponential", "inverse_sigmoid"])
def test_every_schedule_decays_with_its_default_k(schedule):
    """Without k, ε starts at (almost) 1 and has fallen below 0.9 by update 20,000."""
    cfg = ScheduledSamplingConfig(schedule=schedule)
    assert gold_probability(cfg, 0) > 0.99
    assert gold_probability(cfg, 20_000) < 0.9


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"schedule": "linear", "k": 1.0, "c": 0.01, "eps_min": 0.3}, {0: 1.0, 50: 0.5, 500: 0.3}),
        ({"schedule": "exponential", "k": 0.99}, {0: 1.0, 100: 0.99**100}),
        ({"schedule": "inverse_sigmoid", "k": 10.0}, {0: 10 / 11, 50: 10 / (10 + 2.718281828**5)}),
        ({"schedule": "constant", "k": 0.7, "warmup_steps": 5}, {0: 1.0, 4: 1.0, 5: 0.7, 1e6: 0.7}),
        ({"schedule": "constant", "k": 0.0}, {0: 0.0, 9: 0.0}),  # pure sampling is allowed
        # the schedule starts when the warm-up ends: step 60 is its 50th update
        ({"schedule": "linear", "c": 0.01, "warmup_steps": 10}, {9: 1.0, 10: 1.0, 60: 0.5}),
    ],
)
def test_schedule_values(options, expected):
    cfg = ScheduledSamplingConfig(**options)
    for step, eps in expected.items():
        assert gold_probability(cfg, int(step)) == pytest.approx(eps, rel=1e-6)


@pytest.mark.parametrize(
    "options",
    [
        {"schedule": "exponential", "k": 1.5},
        {"schedule": "inverse_sigmoid", "k": 0.5},
        {"schedule": "constant"},  # no default ε
        {"schedule": "linear", "k": 2000.0},  # ε = 1 for 20M updates
        {"schedule": "linear", "c": 0.0},
        {"schedule": "linear", "eps_min": 1.0},
        {"schedule": "exponential", "k": 1.0},  # ε = 1 for ever
        {"schedule": "constant", "k": 1.5},
        {"passes": 1},
        {"mix": "nearest"},
        {"mix": "topk", "topk": 0},
        {"temperature": 0.0},
        {"temperature": 1e-40},  # logits / temperature would overflow to inf - inf = NaN
        {"warmup_steps": -1},
    ],
)
def test_bad_options_are_refused(tiny_recipe, options):
    from nmt.setup.recipe import load_recipe

    with pytest.raises(NmtError, match=r"train\.trainer\."):
        load_recipe(tiny_recipe(train={"trainer": {"kind": "scheduled_sampling", **options}}))


def make(tiny_config, **ss):
    cfg = tiny_config(
        model={"dropout": 0.0},
        train={"trainer": {"kind": "scheduled_sampling", **ss}, "batch_tokens": 2048},
    )
    trainer = prepare(cfg, "cpu")
    batch = trainer.data.train.collate(trainer.data.train.epoch_batches(2048, 0, 0)[0])
    return trainer, batch


def spy_decode(trainer):
    """Record (input embeddings, logits at every position) of each decoder pass."""
    calls = []
    original = trainer.model.decode_states

    def decode_states(tgt_in, state, embeds=None, need_weights=False, tgt_mask=None, update=0):
        states, attention = original(tgt_in, state, embeds, need_weights, tgt_mask, update)
        calls.append((embeds, trainer.model.output(states)))
        return states, attention

    trainer.model.decode_states = decode_states
    return calls


def test_gold_probability_one_is_exactly_teacher_forcing(tiny_config):
    ss, batch = make(tiny_config, schedule="constant", k=1.0)
    tf = prepare(ss.cfg, "cpu")
    tf.model.load_state_dict(ss.model.state_dict())
    grads = []
    for trainer in (ss, tf):
        loss = trainer.loss(batch).total
        loss.backward()
        grads.append([p.grad.clone() for p in trainer.model.parameters()])
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def test_gold_probability_zero_feeds_pass_one_argmax(tiny_config):
    trainer, batch = make(tiny_config, schedule="constant", k=0.0, mix="argmax")
    calls = spy_decode(trainer)
    trainer.loss(batch)
    (_, first), (fed, _) = calls
    table = trainer.model.tgt_embed.tokens.weight
    expected = F.embedding(first.argmax(-1)[:, :-1], table)  # prediction for position t >= 1
    real = batch.tgt_in[:, 1:] != PAD
    torch.testing.assert_close(fed[:, 1:][real], expected[real])
    torch.testing.assert_close(fed[:, 0], F.embedding(batch.tgt_in[:, 0], table))
    assert (fed[:, 1:][~real] == 0).all()  # padding untouched: the PAD embedding is zero


def test_replaced_fraction_converges_to_one_minus_eps(tiny_config):
    trainer, batch = make(tiny_config, schedule="constant", k=0.7)
    fractions = [trainer.loss(batch).stats["ss_replaced"] for _ in range(20)]
    assert sum(fractions) / len(fractions) == pytest.approx(0.3, abs=0.02)


@pytest.mark.parametrize("first_pass_grad", [False, True])
def test_gradient_reaches_pass_one_only_when_asked(tiny_config, first_pass_grad):
    trainer, batch = make(tiny_config, schedule="constant", k=0.0, first_pass_grad=first_pass_grad)
    calls = spy_decode(trainer)
    trainer.loss(batch)
    assert calls[0][1].requires_grad == first_pass_grad
    assert calls[1][1].requires_grad


LOGITS = torch.tensor([2.0, 0.5, -1.0, 1.0, 0.0])  # (V,)


def mixed(mix: str, rows: int = 1, **options) -> tuple[torch.Tensor, torch.Tensor]:
    """The embeddings ``mix`` builds for ``rows`` copies of LOGITS, and the table."""
    torch.manual_seed(0)
    table = torch.randn(5, 8)  # (V,D)
    cfg = ScheduledSamplingConfig(mix=mix, **options)
    return prediction_embeddings(LOGITS.expand(rows, 5), table, cfg), table


def test_softmax_mix_is_the_expected_embedding_at_its_temperature():
    out, table = mixed("softmax", temperature=2.0)
    torch.testing.assert_close(out[0], torch.softmax(LOGITS / 2.0, -1) @ table)


def test_topk_mix_renormalises_over_the_k_best():
    out, table = mixed("topk", topk=2)  # tokens 0 and 3
    w = torch.softmax(torch.tensor([2.0, 1.0]), -1)
    torch.testing.assert_close(out[0], w[0] * table[0] + w[1] * table[3])


@pytest.mark.parametrize(("mix", "options"), [("sample", {}), ("gumbel", {"temperature": 1e-3})])
def test_sampling_mixes_draw_embeddings_as_often_as_the_softmax_says(mix, options):
    """``sample`` feeds one drawn token's embedding; ``gumbel`` at a low temperature
    nearly so (all but near-ties of the perturbed logits): each output is a row of
    the table, drawn with frequency softmax(logits)."""
    out, table = mixed(mix, rows=20000, **options)
    gap = (out.unsqueeze(1) - table).abs().amax(-1)  # (rows,V)
    one_row = (gap.amin(-1) < 1e-3).float().mean()
    assert one_row == 1.0 if mix == "sample" else one_row > 0.995
    freq = torch.bincount(gap.argmin(-1), minlength=5).float() / 20000
    torch.testing.assert_close(freq, torch.softmax(LOGITS, -1), atol=0.015, rtol=0)


@pytest.mark.parametrize("mix", ["argmax", "sample", "topk", "softmax", "gumbel"])
def test_each_mix_and_three_passes(tiny_config, mix):
    trainer, batch = make(tiny_config, schedule="constant", k=0.5, mix=mix, passes=3)
    calls = spy_decode(trainer)
    loss, _, stats = trainer.loss(batch)
    assert len(calls) == 3 and torch.isfinite(loss) and 0 < stats["ss_replaced"] < 1


@pytest.mark.parametrize(
    "model",
    [{"attention": {"kind": kind}} for kind in ATTENTION.names()]
    + [
        {
            "decoder": {"kind": "two_stream", "order": "random", "fusion": "bidaf"},
            "attention": {"kind": "hard", "estimator": "gumbel"},
        }
    ],
)
def test_works_with_every_attention_variant(tiny_config, model):
    cfg = tiny_config(
        model=model,
        train={
            "trainer": {"kind": "scheduled_sampling", "schedule": "constant", "k": 0.5},
            "max_steps": 3,
            "valid_every": 3,
        },
    )
    summary = train(cfg, device="cpu")
    assert summary["steps"] == 3
    assert 1 < summary["cost_vs_teacher_forcing"] < 5  # the extra pass is part of a step


def test_gumbel_temperature_follows_updates_through_passes_and_accumulation(tiny_config):
    """Three updates of two accumulated batches, two passes each: every call of every
    layer's cross-attention is told the update it belongs to (one anneal step per
    update, not per forward call)."""
    cfg = tiny_config(
        model={"decoder_layers": 2, "attention": {"kind": "hard", "estimator": "gumbel"}},
        train={
            "trainer": {"kind": "scheduled_sampling", "schedule": "constant", "k": 0.5},
            "accumulate": 2,
        },
    )
    trainer = prepare(cfg, "cpu")
    seen: dict[int, list[int]] = {}
    for i, layer in enumerate(trainer.model.decoder):
        layer.cross_attn.register_forward_pre_hook(
            lambda m, args, i=i: seen.setdefault(i, []).append(args[2].update)
        )
    plan = trainer.epochs.plan(0)
    for step in range(3):
        trainer.state.step = step
        trainer.train_step([trainer.data.train.collate(b) for b in plan[2 * step : 2 * step + 2]])
    assert seen == {i: [0] * 4 + [1] * 4 + [2] * 4 for i in range(2)}


def test_a_sentence_group_model_counts_sentences_on_the_gold_target_in_both_passes(
    tiny_config,
):
    """The passes feed mixed embeddings; the sentences each query is in come from the
    gold target ids, which both passes hand to the model (it refuses to guess)."""
    cfg = tiny_config(
        model={"dropout": 0.0, "decoder_layers": 2, "decoder": {"group_layers": 1}},
        data={"join": {"prob": 0.5, "max_k": 3}},
        train={"trainer": {"kind": "scheduled_sampling", "schedule": "constant", "k": 0.5}},
    )
    trainer = prepare(cfg, "cpu")
    trainer.epochs.plan(0)
    pairs = trainer.epochs.pairs
    joined = next(e for e in range(len(pairs)) if pairs.src.separator in pairs.src[e])
    batch = pairs.collate([joined])
    calls = []
    original = trainer.model.decode_states

    def decode_states(tgt_in, *args, **kwargs):
        calls.append(tgt_in)
        return original(tgt_in, *args, **kwargs)

    trainer.model.decode_states = decode_states
    loss = trainer.loss(batch).total
    assert torch.isfinite(loss) and len(calls) == 2
    assert all(torch.equal(c, batch.tgt_in) for c in calls)
    assert bool((batch.tgt_in == trainer.model.separators[1]).any())


def test_tied_offsets_shift_every_pass_as_the_source(tiny_config):
    """``model.positions.tie_shift`` under scheduled sampling: one SHAPE draw per
    pair, which the source and every decoder pass's targets read, not one per pass."""
    cfg = tiny_config(
        model={"dropout": 0.0, "positions": {"shift": 20, "tie_shift": True}},
        train={"trainer": {"kind": "scheduled_sampling", "schedule": "constant", "k": 0.5}},
    )
    trainer = prepare(cfg, "cpu")
    batch = trainer.data.train.collate(trainer.data.train.epoch_batches(512, 0, 0)[0])
    model, read = trainer.model, []
    encode, decode_states = model.encode, model.decode_states
    model.encode = lambda src, shift=None: read.append(shift) or encode(src, shift)
    model.decode_states = lambda tgt_in, state, *rest, **named: (
        read.append(state.shift) or decode_states(tgt_in, state, *rest, **named)
    )
    trainer.loss(batch)
    assert len(read) == 3  # the source, then the two passes
    assert read[0].shape == (batch.src.size(0), 1) and len(set(read[0].flatten().tolist())) > 1
    assert all(shift is read[0] for shift in read)
