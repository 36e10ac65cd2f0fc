"""Greedy search, ancestral sampling and batched beam search on the incremental
(cached) decoder, within the most pieces ``decode.max_len_a/b`` allow each
sentence, under the recipe's remedies (nmt.decoding.remedies: a least length, the
oracle length, the length penalty, the word reward, the coverage penalty and any
registered one)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import torch
from torch import Tensor

from nmt.data.batching import bucket, pad
from nmt.data.vocab import BOS, EOS, PAD, Vocab, clip_lines
from nmt.decoding.remedies import Lengths, Remedy, remedies_of
from nmt.errors import NmtError
from nmt.model.decoder import DecoderState
from nmt.model.ensemble import Ensemble, EnsembleState
from nmt.model.seq2seq import Transformer
from nmt.setup.decoding import DecodeConfig, Sampling


def sample_tokens(logp: Tensor, cfg: Sampling, generator: torch.Generator) -> Tensor:
    """One token per row of log-probabilities (n,V) -> (n,)."""
    # Shifted so that the best is 0 before dividing, and divided by no less than the
    # dtype's smallest normal number (5e-324 is 0 in float32): at the smallest
    # temperatures the rest go to -inf and the best keeps probability 1, not NaN.
    temperature = max(cfg.temperature, torch.finfo(logp.dtype).tiny)
    logits = (logp - logp.max(-1, keepdim=True).values) / temperature
    if cfg.top_k:
        kth = logits.topk(min(cfg.top_k, logits.size(-1)), dim=-1).values[:, -1:]  # (n,1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if cfg.top_p < 1:
        ranked, order = logits.sort(dim=-1, descending=True)  # (n,V)
        probs = ranked.softmax(-1)
        outside = probs.cumsum(-1) - probs >= cfg.top_p  # the most probable always stays
        logits = logits.scatter(-1, order, ranked.masked_fill(outside, float("-inf")))
    return torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(1)


@dataclass(frozen=True)
class Hypothesis:
    tokens: list[int]  # target ids, without BOS/EOS
    score: float  # log-probability divided by the length penalty


class Translation(NamedTuple):
    text: str  # detokenised
    score: float
    tokens: list[int]


def max_lengths(src: Tensor, cfg: DecodeConfig, limit: int) -> Tensor:
    """Per-sentence output limit a·S + b (S without padding), capped by ``limit``."""
    s = (src != PAD).sum(1).float()  # (B,)
    return (cfg.max_len_a * s + cfg.max_len_b).long().clamp(1, limit)


def bounds_of(src: Tensor, cfg: DecodeConfig, limit: int, remedies: list[Remedy]) -> Lengths:
    """Each sentence's output bounds: the recipe's most (``max_len_a/b``, capped by
    ``limit``) and no least, as the remedies then change them."""
    limits = max_lengths(src, cfg, limit)
    lengths = Lengths(limits, torch.zeros_like(limits))
    for remedy in remedies:
        lengths = remedy.bounds(lengths, src)
    return lengths


def normalised(remedies: list[Remedy], scores: Tensor, length: Tensor) -> Tensor:
    """Log-probabilities as the remedies rank them (the length penalty)."""
    for remedy in remedies:
        scores = remedy.normalise(scores, length)
    return scores


def _step(
    model: Transformer | Ensemble, last: Tensor, state, need_weights: bool = False
) -> tuple[Tensor, Tensor | None]:
    """The log-probabilities of the next token (N,V) and, when asked, the
    cross-attention it was predicted with, the mean over layers and heads (N,S)."""
    logits, weights = model.decode_step(last, state, need_weights)
    logp = torch.log_softmax(logits[:, -1].float(), dim=-1)
    return logp, None if weights is None else weights[:, -1].float()


def _restrict(
    logp: Tensor, finished: Tensor | None, at_limit: Tensor, too_short: Tensor | None = None
) -> Tensor:
    """The tokens an output may hold next, as log-probabilities (N,V): never PAD or
    BOS (no reference holds them; the rest is not renormalised, so scores stay the
    model's log-probability); finished rows (None: there are none) only continue
    with PAD at no cost; rows shorter than their least length (``too_short``) may
    not end; rows at their length limit must emit EOS (the limit wins)."""
    logp = logp.clone()
    logp[:, [PAD, BOS]] = float("-inf")
    force = at_limit
    if finished is not None:
        logp[finished] = float("-inf")
        logp[finished, PAD] = 0.0
        force = at_limit & ~finished
    eos = logp[force, EOS]
    if too_short is not None:
        logp[too_short & ~at_limit, EOS] = float("-inf")
    logp[force] = float("-inf")
    logp[force, EOS] = eos
    return logp


def _strip(row: list[int]) -> list[int]:
    return row[: row.index(EOS)] if EOS in row else [t for t in row if t != PAD]


@torch.no_grad()
def greedy(
    model: Transformer | Ensemble,
    src: Tensor,
    lengths: Lengths,
    remedies: list[Remedy] = (),  # type: ignore[assignment]
    draw: Callable[[Tensor], Tensor] | None = None,
) -> list[Hypothesis]:
    """Pick the most probable token at each step, or the one ``draw`` picks from the
    log-probabilities (n,V) -> (n,) (sampling). src (B,S); ``lengths`` per sentence.

    A sentence leaves the batch when it emits EOS. Scores are the model's
    log-probability of the output, normalised as the remedies say (the length
    penalty), like beam search's.
    """
    memory, src_mask = model.encode(src)
    state = model.decoder_state(memory, src_mask, incremental=True, src=src)
    B, device = src.size(0), src.device
    tokens = torch.full((B, 1), BOS, dtype=torch.long, device=device)
    total = torch.zeros(B, device=device)
    alive = torch.arange(B, device=device)  # (n,) sentences still decoded
    results: list[Hypothesis] = [Hypothesis([], 0.0)] * B
    for t in range(int(lengths.limit.max())):
        logp, _ = _step(model, tokens[:, -1:], state)
        logp = _restrict(logp, None, t + 1 >= lengths.limit, t < lengths.least)
        if draw is None:
            score, nxt = logp.max(dim=-1)  # (n,)
        else:
            nxt = draw(logp)  # (n,)
            score = logp.gather(-1, nxt.unsqueeze(1)).squeeze(1)
        total += score
        tokens = torch.cat([tokens, nxt.unsqueeze(1)], dim=1)
        done = nxt == EOS  # (n,)
        if not bool(done.any()):
            continue
        final = normalised(remedies, total[done], torch.full_like(total[done], t + 1.0))
        for b, row, s in zip(alive[done].tolist(), tokens[done, 1:].tolist(), final.tolist()):
            results[b] = Hypothesis(_strip(row), s)
        if bool(done.all()):
            return results
        kept = ~done
        alive, tokens, total = (x[kept] for x in (alive, tokens, total))
        lengths = lengths.select(kept)
        state = state.select(kept.nonzero().squeeze(1))
    raise AssertionError("unreachable: every sentence emits EOS by its length limit")


@torch.no_grad()
def beam_search(
    model: Transformer | Ensemble,
    src: Tensor,
    lengths: Lengths,
    beam: int,
    n_best: int = 1,
    remedies: list[Remedy] = (),  # type: ignore[assignment]
) -> list[list[Hypothesis]]:
    """Batched beam search; beams are ranked by log-probability normalised as the
    remedies say plus their terms, at every step and at the end.

    A finished hypothesis stays in its beam (continuing with PAD at no cost, its
    remedies' state and its length frozen), so every sentence holds ``beam``
    candidates until all of them are finished; then it leaves the batch and later
    steps no longer compute it. Returns each sentence's ``n_best`` best, best first.
    """
    B, K, device = src.size(0), beam, src.device
    state, rows = beam_states(model, src, K)
    lengths = lengths.select(rows)
    tokens = torch.full((B * K, 1), BOS, dtype=torch.long, device=device)
    scores = torch.zeros(B, K, device=device)
    scores[:, 1:] = float("-inf")  # all beams start identical: expand only the first
    finished = torch.zeros(B * K, dtype=torch.bool, device=device)
    length, extra = torch.zeros(2, B * K, device=device)  # each row's length, remedy terms
    held = [tuple(x[rows] for x in r.begin(src)) for r in remedies]  # each remedy's state
    attend = any(r.needs_attention for r in remedies)
    alive = torch.arange(B, device=device)  # (n,) sentences still searched
    results: list[list[Hypothesis]] = [[] for _ in range(B)]
    for t in range(int(lengths.limit.max())):
        n = alive.numel()
        at_limit = t + 1 >= lengths.limit  # (n*K,)
        logp, attention = _step(model, tokens[:, -1:], state, need_weights=attend)
        logp = _restrict(logp, finished, at_limit, t < lengths.least)
        cand = scores.view(-1, 1) + logp  # (n*K,V) raw log-probabilities
        cand_len = torch.where(finished, length, torch.full_like(length, t + 1))
        cand_extra = remedy_terms(remedies, held, cand_len, attention, finished)  # (n*K,)
        ranked = normalised(remedies, cand, cand_len) + cand_extra.unsqueeze(1)
        pick, token, scores = best_of(ranked, cand, K)
        length, extra = cand_len[pick], cand_extra[pick]
        held = [tuple(x[pick] for x in h) for h in held]
        tokens = torch.cat([tokens[pick], token.unsqueeze(1)], dim=1)
        # A row at its limit ends whatever it picked (a beam wider than the outputs left
        # to rank, or NaN from the model, fills with impossible candidates, not EOS).
        finished = finished[pick] | (token == EOS) | at_limit[pick]
        done = finished.view(n, K).all(dim=1)  # (n,)
        if not bool(done.any()):
            state = state.select(pick, same_source=True)  # pick stays within each sentence
            continue
        out = done.repeat_interleave(K)  # (n*K,) rows of finished sentences
        final = normalised(remedies, scores[done].view(-1), length[out]) + extra[out]
        _collect(results, alive[done], tokens[out], final.view(-1, K), n_best)
        if bool(done.all()):
            return results
        kept = ~out
        alive, scores = alive[~done], scores[~done]
        tokens, finished, length, extra = (x[kept] for x in (tokens, finished, length, extra))
        held = [tuple(x[kept] for x in h) for h in held]
        lengths = lengths.select(kept)
        state = state.select(pick[kept])  # fewer sentences: memories shrink too
    raise AssertionError("unreachable: every row ends at its length limit")


def beam_states(
    model: Transformer | Ensemble, src: Tensor, K: int
) -> tuple[DecoderState | EnsembleState, Tensor]:
    """The decoder state of each source sentence, K times over (one per beam row), and
    the sentence of each row (B*K,)."""
    memory, src_mask = model.encode(src)
    rows = torch.arange(src.size(0), device=src.device).repeat_interleave(K)  # (B*K,)
    return model.decoder_state(memory, src_mask, True, src).select(rows), rows


def remedy_terms(
    remedies: list[Remedy],
    held: list[tuple[Tensor, ...]],
    length: Tensor,
    attention: Tensor | None,
    finished: Tensor,
) -> Tensor:
    """The sum of the remedies' terms for each row at this step (n*K,), the same for
    all of a row's V tokens; each remedy's state in ``held`` is replaced by its next."""
    total = torch.zeros_like(length)
    for i, remedy in enumerate(remedies):
        term, held[i] = remedy.term(held[i], length, attention, finished)
        if term is not None:
            total = total + term
    return total


def best_of(ranked: Tensor, cand: Tensor, K: int) -> tuple[Tensor, Tensor, Tensor]:
    """The K best of each sentence's K*V candidates by ``ranked`` (n*K,V): the rows
    they extend (n*K,), their tokens (n*K,) and raw log-probabilities ``cand`` (n,K)."""
    n, V = ranked.size(0) // K, ranked.size(1)
    top = ranked.view(n, K * V).topk(K, dim=1).indices  # (n,K)
    pick = (torch.arange(n, device=ranked.device).unsqueeze(1) * K + top // V).view(-1)
    return pick, (top % V).view(-1), cand.view(n, K * V).gather(1, top)


def _collect(
    results: list[list[Hypothesis]],
    sentences: Tensor,
    tokens: Tensor,
    final: Tensor,
    n_best: int,
) -> None:
    """Store the ``n_best`` hypotheses of ``sentences`` (m,) into ``results``, from
    their beams: tokens (m*K, t), final scores (m, K). Impossible candidates (score
    -inf) are left out, so a sentence with fewer possible outputs gets fewer; never
    none: a model that makes every output impossible still gets its best-ranked, for
    one output line per input line."""
    K = final.size(1)
    order = final.argsort(dim=1, descending=True)[:, :n_best]  # (m,n_best)
    rows = tokens[:, 1:].tolist()
    for j, b in enumerate(sentences.tolist()):
        ranked = order[j].tolist()
        possible = [k for k in ranked if final[j, k] != float("-inf")] or ranked[:1]
        results[b] = [Hypothesis(_strip(rows[j * K + k]), float(final[j, k])) for k in possible]


class Listener(Protocol):
    """What hears a translation's progress (nmt.progress.Tally: a bar, a log's lines):
    the sentences a call will translate and their work (source pieces, end of
    sentence included), then each batch's as it is done."""

    def planned(self, sentences: int, work: int) -> None: ...

    def done(self, sentences: int, work: int = 0) -> None: ...


@dataclass(frozen=True)
class Options:
    """What a translation call may be given beyond the model and its search settings."""

    progress: Listener | None = None  # hears the work planned and each batch done
    on_truncated: Callable[[int], None] | None = None  # hears how many lines were cut
    sampling: Sampling | None = None  # draw one output per sentence instead of searching
    # where the draws come from, so that calls for successive parts of one input
    # continue one stream; None: a new one seeded with sampling.seed
    generator: torch.Generator | None = None
    refs: list[str] | None = None  # --length oracle: each output as long as its reference
    # hears each line's source pieces as the model reads them (nmt translate's length
    # check predicts an output's length from them)
    on_sources: Callable[[list[int]], None] | None = None


def translate_ids(
    model: Transformer | Ensemble,
    src_ids: list[list[int]],
    cfg: DecodeConfig,
    device: torch.device,
    options: Options = Options(),
    exact: list[int] | None = None,
) -> list[list[Hypothesis]]:
    """Translate encoded sentences (each without EOS) in input order, by search or,
    with ``options.sampling``, by drawing one output per sentence (``cfg.beam`` must
    be 1); with ``exact``, each output holds exactly that many pieces (``--length
    oracle``: the reference's own length).

    Sentences are bucketed by length into ``cfg.batch_tokens`` batches; an empty
    sentence gets an empty hypothesis without being decoded (and is done at once for
    ``options.progress``, which hears each batch's sentences and source pieces).
    """
    draw = drawing(cfg, options, device)
    limit = model.cfg.max_positions - 1
    if exact is not None:  # the oracle's lengths, within the model's
        exact = [min(e, limit - 1) for e in exact]
    results: list[list[Hypothesis]] = [[Hypothesis([], 0.0)] for _ in src_ids]
    todo = [i for i, s in enumerate(src_ids) if s]
    sizes = [(len(src_ids[i]) + 1, len(src_ids[i]) + 1) for i in todo]  # source pieces, EOS
    if options.progress is not None:
        options.progress.planned(len(src_ids), sum(n for n, _ in sizes))
        options.progress.done(len(src_ids) - len(todo))
    # A beam multiplies the work per sentence: keep the tokens in flight bounded.
    for batch in bucket(sizes, max(1, cfg.batch_tokens // cfg.beam)):
        idx = [todo[j] for j in batch]
        src = pad([src_ids[i] for i in idx], suffix=[EOS]).to(device)
        wanted = None if exact is None else torch.tensor([exact[i] for i in idx], device=device)
        remedies = remedies_of(cfg, wanted)
        lengths = bounds_of(src, cfg, limit, remedies)
        if cfg.beam == 1:
            hyps = [[h] for h in greedy(model, src, lengths, remedies, draw)]
        else:
            hyps = beam_search(model, src, lengths, cfg.beam, cfg.n_best, remedies)
        for i, h in zip(idx, hyps):
            results[i] = h
        if options.progress is not None:
            options.progress.done(len(idx), sum(sizes[j][0] for j in batch))
    return results


def drawing(
    cfg: DecodeConfig, options: Options, device: torch.device
) -> Callable[[Tensor], Tensor] | None:
    """The token draw of ``options.sampling`` (None: search)."""
    if options.sampling is None:
        return None
    if cfg.beam != 1:
        raise NmtError(f"sampling draws one output per sentence; beam is {cfg.beam}, not 1")
    generator = options.generator
    if generator is None:
        generator = torch.Generator(device).manual_seed(options.sampling.seed)
    return functools.partial(sample_tokens, cfg=options.sampling, generator=generator)


def translate_lines(
    model: Transformer | Ensemble,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    lines: list[str],
    cfg: DecodeConfig,
    device: torch.device,
    options: Options = Options(),
) -> list[list[Translation]]:
    """Detokenised n-best lists, one per input line, in input order.

    Lines longer than the model's maximum are truncated, never dropped;
    ``options.on_truncated(n)`` hears how many were. With ``options.refs``
    (``--length oracle``), each output holds exactly as many pieces as its
    reference does.
    """
    limit = model.cfg.max_positions - 1
    ids = encode_source(src_vocab, lines, limit, options.on_truncated)
    if options.on_sources is not None:
        options.on_sources([len(s) for s in ids])
    refs = options.refs
    exact = None if refs is None else [len(r) for r in encode_source(tgt_vocab, refs, limit)]
    model.eval()
    return detokenised(tgt_vocab, translate_ids(model, ids, cfg, device, options, exact))


def detokenised(tgt_vocab: Vocab, nbest: list[list[Hypothesis]]) -> list[list[Translation]]:
    """Hypotheses with their text."""
    flat = tgt_vocab.decode([h.tokens for hyps in nbest for h in hyps])
    out, k = [], 0
    for hyps in nbest:
        out.append([Translation(flat[k + j], h.score, h.tokens) for j, h in enumerate(hyps)])
        k += len(hyps)
    return out


def encode_source(
    vocab: Vocab,
    lines: list[str],
    limit: int,
    on_truncated: Callable[[int], None] | None = None,
) -> list[list[int]]:
    """Source ids, each cut to ``limit`` pieces (one position is kept for EOS);
    ``on_truncated(n)`` hears how many lines were cut, if any. A huge line is cut
    to a bounded number of characters first (:func:`nmt.data.vocab.clip_lines`)."""
    return cut(vocab.encode(clip_lines(lines, limit)), limit, on_truncated)


def encode_marked(
    vocab: Vocab,
    lines: list[list[str]],
    limit: int,
    on_truncated: Callable[[int], None] | None = None,
) -> list[list[int]]:
    """As :func:`encode_source`, for lines given as their sentences: a separator
    between each two (``vocab``'s: a sentence-group model's)."""
    return cut(vocab.encode_sentences([clip_lines(s, limit) for s in lines]), limit, on_truncated)


def cut(
    ids: list[list[int]], limit: int, on_truncated: Callable[[int], None] | None
) -> list[list[int]]:
    """Each line's ids cut to ``limit``; ``on_truncated(n)`` hears how many were cut."""
    long = sum(len(s) > limit for s in ids)
    if long and on_truncated is not None:
        on_truncated(long)
    return [s[:limit] for s in ids]
