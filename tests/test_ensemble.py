"""Ensembles decode with the mean of their members' log-probabilities."""

from __future__ import annotations

import pytest
import torch

from nmt.data.corpus import read_lines
from nmt.data.pipeline import Vocabs
from nmt.data.vocab import Vocab
from nmt.decoding.search import DecodeConfig, translate_ids
from nmt.decoding.translate import ensemble
from nmt.errors import NmtError
from nmt.model.ensemble import Ensemble
from nmt.model.load import Loaded
from tests.helpers import VOCAB, tiny_model

SOURCES = [[5, 6, 7, 8], [9, 10], [11, 12, 13, 14, 15, 16], [], [17]]


def decoded(model, beam):
    cfg = DecodeConfig(beam=beam, n_best=1, max_len_a=0.0, max_len_b=12)
    return [h[0] for h in translate_ids(model.eval(), SOURCES, cfg, torch.device("cpu"))]


@pytest.mark.parametrize("beam", [1, 3])
def test_an_ensemble_of_one_or_of_copies_is_the_model(beam):
    torch.manual_seed(0)
    model = tiny_model()
    alone = decoded(model, beam)
    for members in ([model], [model, model]):
        together = decoded(Ensemble(members), beam)
        assert [h.tokens for h in together] == [h.tokens for h in alone]
        assert [h.score for h in together] == pytest.approx([h.score for h in alone], abs=1e-4)


def test_each_step_is_the_mean_of_the_members_log_probabilities():
    torch.manual_seed(0)
    a, b = tiny_model().eval(), tiny_model().eval()
    src = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 1]])
    tgt = torch.tensor([[2, 10, 11], [2, 12, 13]])
    pair = Ensemble([a, b])
    with torch.no_grad():
        got, _ = pair.decode_step(tgt, pair.decoder_state(*pair.encode(src)))
        want = [torch.log_softmax(m(src, tgt), -1) for m in (a, b)]
    torch.testing.assert_close(got, (want[0] + want[1]) / 2)
    assert got.shape == (2, 3, VOCAB)


def test_members_must_share_their_vocabularies(toy_dir, tiny_config):
    lines = read_lines(toy_dir / "train.src")
    small, large = (Vocab.train(lines, size, "unigram") for size in (60, 90))
    cfg, model = tiny_config(), tiny_model()
    members = [Loaded(cfg, model, Vocabs(small, small)), Loaded(cfg, model, Vocabs(large, large))]
    with pytest.raises(NmtError, match=r"b\.pt: its src vocabulary differs from a\.pt's"):
        ensemble(members, ["a.pt", "b.pt"])
    assert isinstance(ensemble(members[:1] * 2, ["a.pt", "b.pt"]), Ensemble)
