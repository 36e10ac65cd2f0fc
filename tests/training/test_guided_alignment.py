"""Guided alignment: piece-level gold targets, the loss, and training with it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from nmt.attention.base import AttentionOutput
from nmt.data.alignment import word_ids
from nmt.data.corpus import read_lines
from nmt.data.gold_alignments import GoldAlignments
from nmt.data.vocab import BOS, Vocab
from nmt.errors import ConfigError, NmtError
from nmt.setup.training import GuidedAlignment
from nmt.training.guided_alignment import alignment_loss
from nmt.training.run import train
from tests.helpers import random_batch, tiny_model


@pytest.fixture(scope="module")
def vocab(toy_dir):
    lines = read_lines(toy_dir / "train.src")[:300] + read_lines(toy_dir / "train.tgt")[:300]
    return Vocab.train(lines, 150, "unigram")


def test_gold_targets_spread_each_word_link_over_its_pieces(vocab, toy_dir):
    src, tgt = read_lines(toy_dir / "train.src")[:20], read_lines(toy_dir / "train.tgt")[:20]
    links = [line.split() for line in read_lines(toy_dir / "train.align")[:20]]
    pairs = [np.array([list(map(int, p.split("-"))) for p in ln]).reshape(-1, 2) for ln in links]
    gold = GoldAlignments(pairs, vocab, vocab)
    s_ids, t_ids = vocab.encode(src), vocab.encode(tgt)
    m = gold.matrices(np.arange(20), [np.array(x) for x in s_ids], [np.array(x) for x in t_ids])
    assert m.shape == (20, max(map(len, t_ids)) + 1, max(map(len, s_ids)) + 1)
    for b in range(20):
        sw = word_ids([vocab.id_to_piece(i) for i in s_ids[b]])  # compare's grouping
        tw = word_ids([vocab.id_to_piece(i) for i in t_ids[b]])
        linked = {(int(i), int(j)) for i, j in pairs[b]}
        for t, j in enumerate(tw):
            want = np.array([float((i, j) in linked) for i in sw])
            row = m[b, t, : len(sw)].numpy()
            if want.sum():
                np.testing.assert_allclose(row, want / want.sum(), rtol=1e-6)
            else:
                assert not row.any()
        assert not m[b, len(tw)].any() and not m[b, :, len(sw)].any()  # </s> row and column


def test_the_loss_is_the_cross_entropy_against_the_gold_rows():
    torch.manual_seed(0)
    scores = torch.randn(2, 4, 3, 5, requires_grad=True)  # (B,H,T,S)
    weights = scores.softmax(-1)
    gold = torch.zeros(2, 3, 5)
    gold[0, 0, 1] = gold[1, 2, 3] = 1.0
    gold[0, 1, 2] = gold[0, 1, 4] = 0.5
    cfg = GuidedAlignment(weight=0.5, layer=-1, heads=2)
    loss, stats = alignment_loss([[AttentionOutput(torch.zeros(1), weights)]], gold, cfg)
    want = -(gold.unsqueeze(1) * weights[:, :2].log()).sum() / 2
    torch.testing.assert_close(loss, 0.5 * want)
    assert stats["align_outside"] == 0.0 and stats["align_loss"] == pytest.approx(
        float(want.detach()) / 3
    )
    loss.backward()
    assert scores.grad[:, 2:].abs().sum() == 0 and scores.grad[:, :2].abs().sum() > 0


def test_gold_outside_a_window_is_reported_not_fitted():
    weights = torch.tensor([[[[0.0, 0.5, 0.5, 0.0]]]])  # (1,1,1,4): a window over 1..2
    gold = torch.tensor([[[0.5, 0.5, 0.0, 0.0]]])  # half the gold mass at position 0
    attention = [[AttentionOutput(torch.zeros(1), weights)]]
    loss, stats = alignment_loss(attention, gold, GuidedAlignment(layer=-1))
    assert stats["align_outside"] == pytest.approx(0.5)
    assert float(loss) == pytest.approx(0.05 * 0.5 * -np.log(0.5))


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
@pytest.mark.parametrize("kind", ["global", "local_m", "local_p", "hard"])
def test_the_loss_trains_the_attention_of_every_kind(kind):
    """Minimising the loss alone moves each kind's attention onto the gold links
    (hard attention: its sampling distribution α)."""
    torch.manual_seed(0)
    model = tiny_model(kind, **({"window": 2} if kind.startswith("local") else {})).train()
    src = random_batch([9, 7])  # (B,S) real pieces; the model reads them as given
    tgt_in = torch.cat([torch.full((2, 1), BOS), random_batch([8, 6])], 1)  # (B,T)
    gold = torch.zeros(2, tgt_in.size(1), src.size(1))
    for b, t in enumerate([9, 7]):  # target piece t <- source piece t
        gold[b, torch.arange(t - 1), torch.arange(t - 1)] = 1.0
    cfg = GuidedAlignment(weight=1.0, layer=-1, heads=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(40):
        _, attention = model.states(src, tgt_in, need_weights=True)
        loss, stats = alignment_loss(attention, gold, cfg)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(stats["align_loss"])
    assert losses[-1] < 0.5 * losses[0], losses


@pytest.mark.slow
def test_a_run_with_guidance_logs_its_loss_and_the_gold_outside_the_window(tiny_config):
    """Under scheduled sampling (guidance acts on its last pass) with local_m."""
    trainer = {"kind": "scheduled_sampling", "schedule": "constant", "k": 0.5, "warmup_steps": 0}
    cfg = tiny_config(
        model={"attention": {"kind": "local_m", "window": 1}},
        train={
            "alignment": {"layer": -1, "heads": 2},
            "trainer": trainer,
            "max_steps": 4,
            "log_every": 2,
        },
    )
    train(cfg, device="cpu")
    records = [json.loads(line) for line in open(f"{cfg.run_dir}/metrics.jsonl")]
    logged = [r for r in records if "align_loss" in r]
    assert len(logged) == 2 and all(r["align_loss"] > 0 for r in logged)
    assert all(0.0 < r["align_outside"] < 1.0 for r in logged)  # a narrow window misses some
    assert all(r["ss_gold_prob"] == 0.5 for r in logged)


def test_a_missing_or_misfit_alignment_file_is_named(tiny_config, tmp_path):
    cfg = tiny_config(train={"alignment": {"layer": -1, "file": str(tmp_path / "gold.align")}})
    with pytest.raises(NmtError, match=r"gold\.align: no such alignment file"):
        train(cfg, device="cpu")
    (tmp_path / "gold.align").write_text("0-0\n1-1\n")
    with pytest.raises(NmtError, match=r"gold\.align: 2 lines, but the training split has 300"):
        train(cfg, device="cpu")


@pytest.mark.parametrize(
    "alignment, message",
    [
        ({"layer": 1}, "train.alignment.layer: must be in -1..0"),
        ({"layer": 0, "heads": 3}, "train.alignment.heads: must be at most 2"),
    ],
)
def test_layer_and_heads_must_exist(tiny_config, alignment, message):
    with pytest.raises(ConfigError, match=message):
        tiny_config(train={"alignment": alignment})


def test_the_stream_that_predicts_is_supervised():
    """A two-stream layer records its query stream (the one that predicts, its
    weights kept) first and its content stream (weights not kept) second."""
    weights = torch.full((1, 2, 3, 4), 0.25)
    query, content = (
        AttentionOutput(torch.zeros(1, 3, 8), weights),
        AttentionOutput(torch.zeros(1, 3, 8)),
    )
    gold = torch.eye(3, 4).unsqueeze(0)
    cfg = GuidedAlignment(layer=0, heads=2)
    loss, _ = alignment_loss([[query, content]], gold, cfg)
    assert loss.item() == pytest.approx(cfg.weight * 3 * np.log(4))


@pytest.mark.slow
@pytest.mark.parametrize("order", ["left_to_right", "random"])
def test_guidance_trains_a_two_stream_decoder(tiny_config, order):
    cfg = tiny_config(
        model={"decoder_layers": 2, "decoder": {"kind": "two_stream", "order": order}},
        train={"alignment": {}, "max_steps": 2, "log_every": 1},
    )
    train(cfg, device="cpu")
    records = [json.loads(line) for line in open(f"{cfg.run_dir}/metrics.jsonl")]
    assert [r["align_loss"] > 0 for r in records if "align_loss" in r] == [True, True]
