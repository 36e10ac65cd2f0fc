"""Every attention variant and architecture option trains the toy corpus (real Trainer)."""

from __future__ import annotations

import json
import math

import pytest

from nmt.attention import ATTENTION
from nmt.training.run import prepare

pytestmark = pytest.mark.slow  # several seconds per test: `make test` runs them


def train_toy(
    tiny_config, overrides: dict, steps: int, batch_tokens: int = 512
) -> tuple[list[dict], float]:
    """Train the toy corpus; the metrics records and the uniform loss log(V). Batches of
    512 tokens, with a third more updates than batches of 1,024 needed (two thirds of
    the tokens), reach each bar with about the margin those did, in less CPU time
    (docs/benchmarks.md, session 62)."""
    cfg = tiny_config(
        model={"d_model": 64, "heads": 4, "ffn": 128, "dropout": 0.0, **overrides},
        train={
            "max_steps": steps,
            "valid_every": steps // 2,
            "lr": 5e-3,
            "warmup": 20,
            "batch_tokens": batch_tokens,
            "valid_bleu": False,
            "early_stopping": "loss",
        },
    )
    trainer = prepare(cfg, "cpu")
    trainer.run()
    records = [json.loads(x) for x in open(f"{cfg.run_dir}/metrics.jsonl")]
    return records, math.log(len(trainer.data.vocabs.tgt))


@pytest.mark.parametrize("kind", ATTENTION.names())
def test_variant_trains_toy_to_a_low_loss(kind, tiny_config):
    options = {"kind": kind, **({"window": 3} if kind.startswith("local") else {})}
    if kind == "hard":  # the estimator with the training log of its own (reward, baseline)
        options["estimator"] = "reinforce"
    steps = 270 if kind == "hard" else 200  # REINFORCE's noisy gradient needs more
    records, uniform = train_toy(tiny_config, {"attention": options}, steps)
    valid = [r["valid_loss"] for r in records if "valid_loss" in r]
    assert valid[-1] < valid[0] and valid[-1] < 0.5 * uniform, (kind, valid, uniform)
    if kind == "hard":
        assert any("attn_reward" in r for r in records)


# name: (model overrides, updates). The two-stream decoder's predicting stream
# starts from positions alone and must find even the previous token by
# attention: it needs more updates.
ARCHITECTURES = {
    "trilinear+bidaf": ({"attention": {"score": "trilinear"}, "decoder": {"fusion": "bidaf"}}, 200),
    "qanet": ({"encoder": {"block": "qanet", "kernel": 5, "survival": 0.9}}, 200),
    "two_stream": ({"decoder": {"kind": "two_stream"}}, 400),
}


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_architecture_trains_toy_to_a_low_loss(name, tiny_config):
    records, uniform = train_toy(tiny_config, *ARCHITECTURES[name])
    valid = [r["valid_loss"] for r in records if "valid_loss" in r]
    assert valid[-1] < valid[0] and valid[-1] < 0.5 * uniform, (name, valid, uniform)


def test_random_order_learns_its_objective(tiny_config):
    """Random factorisation orders train mostly on contexts other than the left-to-right
    prefix used in validation: the objective trained must fall, and left-to-right
    prediction must end well below uniform."""
    overrides = {"decoder": {"kind": "two_stream", "order": "random"}}
    # 1,024-token batches: on 512 its training objective's margin thinned
    # (docs/benchmarks.md, session 62)
    records, uniform = train_toy(tiny_config, overrides, 300, batch_tokens=1024)
    train = [r["loss"] for r in records if "loss" in r]
    valid = [r["valid_loss"] for r in records if "valid_loss" in r]
    first, last = sum(train[:10]) / 10, sum(train[-10:]) / 10
    assert last < 0.75 * first and valid[-1] < 0.75 * uniform, (first, last, valid, uniform)
