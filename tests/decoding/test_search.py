"""Search: incremental equals full, beam 1 equals greedy, n-best is sorted and scored."""

from __future__ import annotations

import functools
import itertools

import pytest
import torch

from nmt.attention import ATTENTION
from nmt.data.vocab import BOS, EOS, PAD
from nmt.decoding.remedies import Coverage, LengthPenalty, Lengths, WordReward, length_penalty
from nmt.decoding.search import (
    DecodeConfig,
    Hypothesis,
    Options,
    Sampling,
    beam_search,
    greedy,
    max_lengths,
    sample_tokens,
    translate_ids,
)
from nmt.errors import NmtError
from nmt.model.seq2seq import Transformer
from tests.helpers import (
    VOCAB,
    Heard,
    assert_incremental_equals_full,
    random_batch,
    tiny_model,
)
from tests.model.test_architectures import ARCHITECTURES


def bound(limits: torch.Tensor) -> Lengths:
    """At most limit − 1 pieces and EOS, no least length."""
    return Lengths(limits, torch.zeros_like(limits))


@pytest.mark.parametrize("cuts", [range(12), [0, 4, 6, 7, 11]], ids=["steps", "chunks"])
@pytest.mark.parametrize("kind", ATTENTION.names())
@pytest.mark.parametrize("name", ["standard", *ARCHITECTURES])
def test_incremental_equals_full(kind, name, cuts):
    """For every attention variant, alone and under every other architecture option;
    one position a step (as search decodes) or several at once after cached ones."""
    overrides, options = ARCHITECTURES.get(name, ({}, {}))
    window = {"window": 2} if kind.startswith("local") else {}
    torch.manual_seed(0)
    model = tiny_model(kind, model=overrides, **options, **window).eval()
    assert_incremental_equals_full(model, cuts)


def test_beam_one_equals_greedy():
    torch.manual_seed(1)
    model = tiny_model().eval()
    src = random_batch([6, 9, 3, 11])
    limits = torch.tensor([12, 15, 7, 20])
    g = greedy(model, src, bound(limits), [LengthPenalty(0.6)])
    b = beam_search(model, src, bound(limits), beam=1, remedies=[LengthPenalty(0.6)])
    assert [h.tokens for h in g] == [hs[0].tokens for hs in b]
    for h, hs in zip(g, b):
        assert h.score == pytest.approx(hs[0].score, abs=1e-4)


@torch.no_grad()
def test_nbest_sorted_and_scores_match_the_model():
    torch.manual_seed(2)
    model = tiny_model().eval()
    src = random_batch([7, 4])
    alpha = 0.6
    nbest = beam_search(model, src, bound(torch.tensor([9, 9])), 4, 4, [LengthPenalty(alpha)])
    for b, hyps in enumerate(nbest):
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True) and len(hyps) == 4
        for h in hyps:
            ended = len(h.tokens) < 9  # at the limit EOS was forced
            seq = torch.tensor([[BOS, *h.tokens, EOS]])
            logp = torch.log_softmax(model(src[b : b + 1], seq[:, :-1]), -1)[0]
            raw = logp.gather(1, seq[0, 1:, None]).sum()
            expected = raw / length_penalty(torch.tensor(len(h.tokens) + 1.0), alpha)
            if ended:
                assert h.score == pytest.approx(float(expected), abs=1e-4)


@torch.no_grad()
@pytest.mark.parametrize("limit", [1, 4])
@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_a_beam_that_prunes_nothing_finds_the_exhaustive_n_best(alpha, limit):
    """Over a target vocabulary of 7, an output is up to limit - 1 of the 4 tokens a
    reference can hold (not PAD, BOS or EOS), then EOS: 85 outputs at limit 4, one
    (the empty one) at limit 1. A beam as wide as all of them never prunes, so its
    n-best must be the best of them under the full model's length-normalised
    log-probability, and no more than exist: the search's bookkeeping (finished rows
    kept at no cost, the forced EOS, unequal lengths, a beam wider than the
    vocabulary) loses, invents or mis-scores nothing."""
    torch.manual_seed(4)
    V, n_best = 7, 12
    model = Transformer(tiny_model().cfg, VOCAB, V, PAD, share_embeddings=False).eval()
    model.output.weight.mul_(4)  # sharper than at initialisation: fewer near-ties
    src = random_batch([5])
    content = [t for t in range(V) if t not in (PAD, BOS, EOS)]
    outputs = [list(o) for n in range(limit) for o in itertools.product(content, repeat=n)]
    seqs = torch.tensor([[BOS, *o, *[EOS] * (limit - len(o))] for o in outputs])  # (N,limit+1)
    logp = torch.log_softmax(model(src.expand(len(outputs), -1), seqs[:, :-1]), -1)
    token_logp = logp.gather(-1, seqs[:, 1:, None]).squeeze(-1)  # (N,limit)
    lengths = torch.tensor([len(o) + 1 for o in outputs])  # with EOS
    used = torch.arange(limit) < lengths[:, None]
    exhaustive = (token_logp * used).sum(1) / ((5 + lengths) / 6) ** alpha  # Wu et al., eq. 14

    beam = max(len(outputs), n_best)
    found = beam_search(
        model, src, bound(torch.tensor([limit])), beam, n_best, [LengthPenalty(alpha)]
    )[0]
    best = exhaustive.topk(min(n_best, len(outputs))).values
    torch.testing.assert_close(torch.tensor([h.score for h in found]), best, atol=1e-4, rtol=0)
    for h in found:
        assert h.score == pytest.approx(float(exhaustive[outputs.index(h.tokens)]), abs=1e-4)


def test_output_limit_is_a_times_the_unpadded_source_length_plus_b_capped():
    """a·S + b, S the source's pieces without padding (EOS counted), floored; never
    above the model's limit, never below 1."""
    src = torch.tensor([[5, 6, 7, EOS], [5, EOS, PAD, PAD], [EOS, PAD, PAD, PAD]])
    limits = max_lengths(src, DecodeConfig(max_len_a=1.5, max_len_b=2), limit=7)
    assert limits.tolist() == [7, 5, 3]  # 1.5·4 + 2 = 8 -> 7; 1.5·2 + 2; 1.5·1 + 2 = 3.5
    assert max_lengths(src, DecodeConfig(max_len_a=0.0, max_len_b=1), 7).tolist() == [1] * 3


def reference_beam_search(
    model, src, limit, beam, alpha, n_best, coverage=0.0, reward=0.0, least=0
):
    """Beam search written plainly, one hypothesis at a time with full forward passes:
    each step extends every unfinished hypothesis by every token an output may hold
    (never PAD or BOS; EOS not before ``least`` pieces; only EOS at the limit), keeps
    each finished one as it is, and keeps the ``beam`` best of all of them by
    log-probability / ((5 + |Y|) / 6) ** alpha (Wu et al. 2016, eq. 14; |Y| counts
    EOS) + γ·|Y| (Murray & Chiang 2018) + β·Σ_s log min(max(c_s, 10⁻³), 1), c_s the
    attention source piece s (neither padding nor EOS) received over the steps of Y,
    the mean over layers and heads (Wu et al. 2016, eq. 14), until every kept one is
    finished."""
    counted = (src[0] != PAD) & (src[0] != EOS)

    @functools.cache  # the steps of Y read BOS and Y's prefix: a parent's children share it
    def cover(prefix):
        _, attention = model.states(src, torch.tensor([[BOS, *prefix]]), need_weights=True)
        weights = torch.stack([calls[0].weights for calls in attention]).mean((0, 2))[0]
        c = weights.sum(0)[counted]  # (S',) over the hypothesis's steps
        return float(c.clamp(max=1.0).clamp(min=1e-3).log().sum())

    def ranked(hyp):
        tokens, logp, _ = hyp
        penalty = coverage * cover(tokens[:-1]) if coverage else 0.0
        return logp / ((5 + len(tokens)) / 6) ** alpha + reward * len(tokens) + penalty

    beams = [((), 0.0, False)]
    for t in range(limit):
        candidates = [h for h in beams if h[2]]
        for tokens, logp, _ in (h for h in beams if not h[2]):
            step = torch.log_softmax(model(src, torch.tensor([[BOS, *tokens]])), -1)[0, -1]
            for token in range(step.numel()):
                if token in (PAD, BOS) or (token == EOS and t < least and t + 1 < limit):
                    continue
                if t + 1 < limit or token == EOS:
                    candidates.append(((*tokens, token), logp + float(step[token]), token == EOS))
        beams = sorted(candidates, key=ranked, reverse=True)[:beam]
        if all(h[2] for h in beams):
            break
    return [(list(h[0][:-1]), ranked(h)) for h in beams[:n_best]]


@torch.no_grad()
@pytest.mark.parametrize(("beam", "alpha"), [(2, 0.0), (3, 1.0), (4, 2.5)])
def test_a_pruning_beam_finds_what_the_plain_beam_search_finds(beam, alpha):
    """Over a vocabulary of 9 the beam prunes at every step, so which candidates it
    keeps (ranked by length-normalised score, finished ones among them) decides the
    outcome: the batched search must keep the same ones as the plain one."""
    torch.manual_seed(5)
    model = Transformer(tiny_model().cfg, VOCAB, 9, PAD, share_embeddings=False).eval()
    model.output.weight.mul_(3)  # sharper than at initialisation: EOS comes and goes
    for n, limit in ((5, 6), (3, 4), (8, 7)):
        src = random_batch([n])
        want = reference_beam_search(model, src, limit, beam, alpha, beam)
        penalty = [LengthPenalty(alpha)]
        found = beam_search(model, src, bound(torch.tensor([limit])), beam, beam, penalty)[0]
        assert [h.tokens for h in found] == [tokens for tokens, _ in want]
        assert [h.score for h in found] == pytest.approx([s for _, s in want], abs=1e-4)


@torch.no_grad()
@pytest.mark.parametrize("kind", ["global", "local_m", "sparsemax"])
@pytest.mark.parametrize(
    ("coverage", "reward", "least"),
    [(0.0, 0.5, 0), (0.0, -0.7, 0), (1.5, 0.0, 0), (0.8, 0.3, 0), (0.0, 0.0, 4)],
)
def test_coverage_word_reward_and_least_length_match_a_plain_beam(kind, coverage, reward, least):
    """GNMT's coverage penalty from the variant's own cross-attention, the word reward
    and the least length rank and prune as the plain search written from their
    equations does, for soft (global), windowed (local_m: zero weight outside the
    window) and sparse (sparsemax) attention."""
    torch.manual_seed(7)
    window = {"window": 1} if kind == "local_m" else {}
    model = Transformer(tiny_model(kind, **window).cfg, VOCAB, 9, PAD, False).eval()
    model.output.weight.mul_(3)
    for n, limit in ((5, 6), (7, 5)):
        src = random_batch([n])
        want = reference_beam_search(model, src, limit, 3, 1.0, 3, coverage, reward, least)
        lengths = Lengths(torch.tensor([limit]), torch.tensor([least]))
        remedies = [LengthPenalty(1.0), WordReward(reward), Coverage(coverage)]
        found = beam_search(model, src, lengths, 3, 3, remedies)[0]
        assert [h.tokens for h in found] == [tokens for tokens, _ in want]
        assert [h.score for h in found] == pytest.approx([s for _, s in want], abs=1e-4)
        assert least == 0 or all(len(h.tokens) >= min(least, limit - 1) for h in found)


@torch.no_grad()
@pytest.mark.parametrize(
    ("beam", "sampling"), [(1, None), (1, Sampling(temperature=5.0)), (4, None)]
)
def test_no_output_holds_pad_or_bos_however_probable(beam, sampling):
    """PAD and BOS never occur in a reference, so no search or draw may emit them,
    even from a model that puts nearly all its mass on them."""
    torch.manual_seed(5)
    model = tiny_model().eval()
    direction = torch.randn(model.cfg.d_model)
    model.decoder_norm.weight.zero_()  # every decoder state is ``direction``
    model.decoder_norm.bias.copy_(direction)
    model.output.weight[PAD] = 5 * direction
    model.output.weight[BOS] = 4 * direction
    src = [torch.randint(4, VOCAB, (n,)).tolist() for n in (3, 8, 5)]
    cfg = DecodeConfig(beam=beam, n_best=beam)
    for hyps in translate_ids(model, src, cfg, torch.device("cpu"), Options(sampling=sampling)):
        assert len(hyps) == beam
        assert all(PAD not in h.tokens and BOS not in h.tokens for h in hyps)


@torch.no_grad()
@pytest.mark.parametrize("beam", [1, 4])
def test_a_model_gone_to_nan_still_gives_one_output_per_sentence(beam):
    """Weights that diverged (an absurd learning rate) make every score NaN; the
    search must still return a hypothesis per sentence, so that translate writes
    one line per input line."""
    model = tiny_model().eval()
    model.output.weight.fill_(float("nan"))
    src = [torch.randint(4, VOCAB, (n,)).tolist() for n in (3, 8)]
    cfg = DecodeConfig(beam=beam, n_best=beam)
    for hyps in translate_ids(model, src, cfg, torch.device("cpu")):
        assert len(hyps) >= 1


@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize(
    ("kind", "name"),
    [(kind, "standard") for kind in ATTENTION.names()]
    + [("global", name) for name in ARCHITECTURES],
)
def test_search_of_a_batch_equals_each_sentence_alone(kind, name, beam):
    """Sentences leave the batch as they finish, and beams reorder within their
    sentence: neither may change any sentence's n-best (lengths, limits and finishing
    times differ across the batch on purpose), for every variant and for every
    architecture option's decoder caches. Beam 1 is greedy search."""
    overrides, options = ARCHITECTURES.get(name, ({}, {}))
    window = {"window": 2} if kind.startswith("local") else {}
    torch.manual_seed(3)
    model = tiny_model(kind, model=overrides, **options, **window).eval()
    src = random_batch([6, 11, 3, 9, 14])
    limits = torch.tensor([4, 16, 9, 12, 20])

    def search(src: torch.Tensor, limits: torch.Tensor) -> list[list[Hypothesis]]:
        if beam == 1:
            return [[h] for h in greedy(model, src, bound(limits), [LengthPenalty(0.6)])]
        return beam_search(model, src, bound(limits), beam, beam, [LengthPenalty(0.6)])

    together = search(src, limits)
    for b in range(src.size(0)):
        n = int((src[b] != PAD).sum())
        alone = search(src[b : b + 1, :n], limits[b : b + 1])[0]
        assert [h.tokens for h in together[b]] == [h.tokens for h in alone]
        for h, g in zip(together[b], alone):
            assert h.score == pytest.approx(g.score, abs=1e-4)


def test_sampled_tokens_follow_the_temperature_and_the_cuts():
    """Frequencies over many draws match softmax(log p / T) renormalised over the
    tokens the cuts keep; a cut token is never drawn."""
    logp = torch.log_softmax(torch.tensor([2.0, 1.5, 1.0, 0.0, -1.0, -3.0]), -1)
    rows = logp.expand(40_000, -1)
    cases = [
        (Sampling(temperature=0.7), [0, 1, 2, 3, 4, 5]),
        (Sampling(temperature=2.0, top_k=3), [0, 1, 2]),
        (Sampling(top_p=0.8), None),  # the smallest prefix of the ranking holding 0.8
    ]
    probs = logp.exp()
    nucleus = [i for i in range(6) if float(probs[:i].sum()) < 0.8]
    for cfg, kept in cases:
        kept = kept or nucleus
        drawn = sample_tokens(rows, cfg, torch.Generator().manual_seed(0))
        freq = torch.bincount(drawn, minlength=6).float() / len(drawn)
        want = torch.zeros(6)
        want[kept] = torch.softmax(logp[kept] / cfg.temperature, -1)
        torch.testing.assert_close(freq, want, atol=0.01, rtol=0)
        assert set(drawn.unique().tolist()) == set(kept)


@pytest.mark.parametrize("temperature", [1e-40, 5e-324])
def test_the_smallest_temperatures_draw_the_most_probable_token(temperature):
    """Any temperature the recipe accepts: divided unshifted, log-probs overflowed to
    -inf everywhere and multinomial failed on NaN."""
    logp = torch.log_softmax(torch.randn(50, 30), -1)
    drawn = sample_tokens(logp, Sampling(temperature=temperature), torch.Generator())
    assert torch.equal(drawn, logp.argmax(-1))


def test_sampling_with_top_k_1_is_greedy_search():
    torch.manual_seed(4)
    model = tiny_model().eval()
    src = [s.tolist() for s in random_batch([6, 9, 3, 11])]
    src = [[t for t in s if t != PAD] for s in src]  # without padding
    cfg = DecodeConfig(beam=1, alpha=0.6)
    searched = translate_ids(model, src, cfg, torch.device("cpu"))
    drawn = translate_ids(model, src, cfg, torch.device("cpu"), Options(sampling=Sampling(top_k=1)))
    assert [h[0].tokens for h in drawn] == [h[0].tokens for h in searched]
    assert [h[0].score for h in drawn] == pytest.approx([h[0].score for h in searched])


def test_the_same_seed_draws_the_same_translations():
    torch.manual_seed(5)
    model = tiny_model().eval()
    src = [[5 + (i * j) % 20 for j in range(4 + i)] for i in range(8)]
    cfg = DecodeConfig(beam=1)

    def draw(seed):
        out = translate_ids(
            model, src, cfg, torch.device("cpu"), Options(sampling=Sampling(2.0, seed=seed))
        )
        return [h[0].tokens for h in out]

    assert draw(1) == draw(1)
    assert draw(1) != draw(2)
    with pytest.raises(NmtError, match="beam is 3"):
        translate_ids(
            model, src, DecodeConfig(beam=3), torch.device("cpu"), Options(sampling=Sampling())
        )


@pytest.mark.parametrize("beam", [1, 3])
def test_progress_hears_every_sentence_and_its_source_pieces_once(beam):
    """What a bar and its ETA count (nmt.progress.Tally): the work planned is every
    sentence's source pieces with its end of sentence; the batches done add up to it,
    an empty sentence done at once with no work, and go from short to long."""
    torch.manual_seed(0)
    model = tiny_model("global").eval()
    lengths = [5, 0, 12, 3, 7, 30, 1, 18]
    src = [torch.randint(4, VOCAB, (n,)).tolist() for n in lengths]
    heard = Heard()
    cfg = DecodeConfig(beam=beam, batch_tokens=24 * beam)
    translate_ids(model, src, cfg, torch.device("cpu"), Options(progress=heard))
    work = sum(n + 1 for n in lengths if n)
    assert heard.plan() == (len(src), work)
    assert heard.batches[0] == (1, 0)  # the empty sentence
    per_sentence = [w / s for s, w in heard.batches[1:]]
    assert len(per_sentence) > 1 and per_sentence == sorted(per_sentence)
