"""Validation's figures, which early stopping and ``best.pt`` are chosen by."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import pytest
import sacrebleu
import torch
import torch.nn.functional as F

from nmt.data.batching import ParallelData
from nmt.data.vocab import BOS, EOS
from nmt.decoding.search import DecodeConfig, Translation
from nmt.training import validation
from nmt.training.validation import dev_scores
from tests.helpers import VOCAB, tiny_model


@torch.no_grad()
def test_dev_loss_is_the_mean_nll_of_every_real_target_token_without_dropout():
    """Batched and padded as training batches are, the dev loss is still each pair's
    summed NLL (target pieces and EOS, no label smoothing) over the number of those
    tokens, with dropout off; perplexity is its exponential."""
    torch.manual_seed(0)
    model = tiny_model(dropout=0.3)
    g = torch.Generator().manual_seed(1)
    src, tgt = (
        [torch.randint(4, VOCAB, (n,), generator=g).tolist() for n in lengths]
        for lengths in ((3, 9, 5, 12, 1, 7), (4, 2, 10, 6, 8, 1))
    )
    data = SimpleNamespace(dev=ParallelData.from_lists(src, tgt))
    cfg = SimpleNamespace(train=SimpleNamespace(batch_tokens=24, valid_bleu=False))
    assert len(data.dev.epoch_batches(24, 0, 0)) > 1
    got = dev_scores(model.train(), data, cfg, torch.device("cpu"), bf16=False)
    nll = tokens = 0.0
    for s, t in zip(src, tgt):
        logits = model(torch.tensor([[*s, EOS]]), torch.tensor([[BOS, *t]]))[0]  # (T,V)
        nll += float(F.cross_entropy(logits, torch.tensor([*t, EOS]), reduction="sum"))
        tokens += len(t) + 1
    assert got == {
        "valid_loss": pytest.approx(nll / tokens, rel=1e-5),
        "valid_ppl": pytest.approx(math.exp(nll / tokens), rel=1e-5),
    }


def test_dev_bleu_scores_greedy_translations_whatever_the_recipes_beam(monkeypatch):
    """valid_bleu is sacreBLEU's corpus BLEU of one greedy translation per dev line."""
    seen = {}

    def translate(model, src_vocab, tgt_vocab, lines, cfg, device, options):
        seen["cfg"] = cfg
        return [[Translation("a cat sits on the mat", 0.0, [])], [Translation("the dog", 0.0, [])]]

    monkeypatch.setattr(validation, "translate_lines", translate)
    refs = ["a cat sat on the mat", "the dog runs"]
    data = SimpleNamespace(
        dev=ParallelData.from_lists([[5]], [[6]]),
        vocabs=SimpleNamespace(src=None, tgt=None),
        dev_src=["x", "y"],
        dev_refs=refs,
    )
    decode = DecodeConfig(beam=5, n_best=3)
    cfg = SimpleNamespace(train=SimpleNamespace(batch_tokens=24, valid_bleu=True), decode=decode)
    got = dev_scores(tiny_model(), data, cfg, torch.device("cpu"), bf16=False)
    assert seen["cfg"] == dataclasses.replace(decode, beam=1, n_best=1)
    want = sacrebleu.corpus_bleu(["a cat sits on the mat", "the dog"], [refs]).score
    assert got["valid_bleu"] == pytest.approx(want)
