"""Every registered attention variant trains the toy corpus through the real Trainer."""

from __future__ import annotations

import json
import math

import pytest

from nmt.attention import ATTENTION
from nmt.training import Trainer


@pytest.mark.parametrize("kind", ATTENTION.names())
def test_variant_trains_toy_to_a_low_loss(kind, tiny_config):
    options = {"kind": kind, **({"window": 3} if kind.startswith("local") else {})}
    cfg = tiny_config(
        model={"d_model": 64, "heads": 4, "ffn": 128, "dropout": 0.0, "attention": options},
        train={
            "max_steps": 200,
            "valid_every": 100,
            "lr": 5e-3,
            "warmup": 20,
            "batch_tokens": 1024,
            "valid_bleu": False,
            "early_stopping": "loss",
        },
    )
    trainer = Trainer(cfg, device="cpu")
    trainer.run()
    records = [json.loads(x) for x in open(f"{cfg.run_dir}/metrics.jsonl")]
    valid = [r["valid_loss"] for r in records if "valid_loss" in r]
    uniform = math.log(len(trainer.vocabs.tgt))
    assert valid[-1] < valid[0] and valid[-1] < 0.5 * uniform, (kind, valid, uniform)
    if kind == "hard":
        assert any("attn_reward" in r for r in records)
