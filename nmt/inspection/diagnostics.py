"""Diagnostics that say why variants differ, beyond BLEU: does a model stop early or
run on, repeat itself, leave source words untranslated, jump back and forth, and
which words it gets right.

Each sentence-level diagnostic is kept per sentence as a (numerator, denominator)
pair, so that a split, a source-length bucket or a resample is scored as a ratio
of sums:

- ``length_ratio``: hypothesis words / reference words (sacreBLEU's 13a tokens,
  the lengths BLEU's brevity penalty compares): below 1 a model stops early,
  above 1 it runs on.
- ``repetition``: seq-rep-2 of Welleck et al. 2020 (sec. 6): per sentence, the
  share of its word bigrams that repeat an earlier bigram of the same sentence,
  1 − unique / all, averaged over the sentences that have a bigram (each
  sentence's pair is (its share, 1), so the ratio of sums is that mean).
- ``dropped``: the share of source words whose attention mass summed over the
  whole output (mean over layers and heads, the word's pieces added up) stays
  below :data:`DROPPED_BELOW`: the coverage view of Tu et al. 2016, read while
  the model reads its own translation.
- ``backward``: how far the attention's peak moves back, in source pieces per
  target step (the sum of max(0, a_{t−1} − a_t) over the argmax positions a_t of
  the layer- and head-mean attention): 0 for a strictly monotone reading.

``center_distance`` (local variants, read on the references) is how far the
window's centre p_t (local-p's predicted one, Luong et al. 2015, eq. 9; local-m's
set by position) lands from the source position that target piece t is aligned
to, in source pieces: the mean position of the pieces of the source words that
gold links align its word to, where the split has gold alignments, else the
diagonal t·(S−1)/(T−1). A window of half-width w only sees the aligned word while
this distance stays under w.

On a joined split (``NAME*K``), each sentence is K captions end to end, and two
figures per caption k say which of them a variant translated:
``caption_covered``, the share of caption k's source words whose attention mass
over the whole output reaches :data:`DROPPED_BELOW` (1 − dropped, caption by
caption), and ``caption_recall``, chrF's character n-gram recall (Popović 2015,
orders 1–6, spaces removed, as sacreBLEU) of caption k's reference in the whole
output: how much of caption k the output holds, whatever else it holds.

``word_accuracy`` is compare-mt's word F-measure by frequency bucket (Neubig et
al. 2019): each target word bucketed by its count in the training targets, an
output word matching a reference word at most as often as the reference has it.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from collections.abc import Iterable

import numpy as np
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

from nmt.data.alignment import Alignment, word_ids
from nmt.inspection.maps import AttentionMap

DROPPED_BELOW = 0.5  # attention mass over the whole output under which a word counts as dropped
FREQUENCY_EDGES = (1, 2, 3, 4, 5, 10, 100, 1000)  # compare-mt's default bucket cutoffs
WORD_START = "▁"  # SentencePiece marks the first piece of a word

_tokenize = Tokenizer13a()


def tokens_13a(text: str) -> list[str]:
    """sacreBLEU's 13a tokens of ``text``: what BLEU counts."""
    return _tokenize(text.strip()).split()


def repetition(hyp: str) -> tuple[float, int]:
    """(seq-rep-2 of one hypothesis, 1); (0, 0) for one without a bigram, which
    Welleck et al.'s mean over sequences leaves out."""
    grams = list(itertools.pairwise(tokens_13a(hyp)))
    if not grams:
        return 0.0, 0
    return 1 - len(set(grams)) / len(grams), 1


def word_starts(amap: AttentionMap) -> list[int]:
    """The source pieces that start a SentencePiece word (``</s>`` left out)."""
    return [i for i, piece in enumerate(amap.src[:-1]) if i == 0 or piece.startswith(WORD_START)]


def source_word_mass(amap: AttentionMap) -> np.ndarray:
    """(source words,) attention mass each source word receives over the whole output:
    the layer- and head-mean weights summed over target positions and over the word's
    pieces (``</s>`` left out)."""
    mass = amap.weights.mean((0, 1)).sum(0)[:-1]  # (S−1,) per source piece
    starts = word_starts(amap)
    return np.add.reduceat(mass, starts) if starts else np.zeros(0)


def dropped(amap: AttentionMap, below: float = DROPPED_BELOW) -> tuple[int, int]:
    """(source words with mass under ``below``, source words) of one sentence."""
    mass = source_word_mass(amap)
    return int((mass < below).sum()), len(mass)


def caption_covered(
    amap: AttentionMap, counts: list[int], below: float = DROPPED_BELOW
) -> list[float]:
    """Per caption, the share of its source words (``counts`` words each, in order)
    whose attention mass over the whole output is at least ``below``. Where the
    source's SentencePiece words are not the captions' whitespace words (a cut input),
    the caption boundaries are scaled to the words there are."""
    mass = source_word_mass(amap)
    bounds = np.concatenate([[0], np.cumsum(counts)]).astype(np.float64)
    if bounds[-1] != len(mass):
        bounds = bounds * len(mass) / max(bounds[-1], 1)
    edges = np.round(bounds).astype(int)
    return [
        float((mass[a:b] >= below).mean()) if b > a else float("nan")
        for a, b in itertools.pairwise(edges)
    ]


def caption_starts(amap: AttentionMap, counts: list[int]) -> list[int]:
    """The source piece at which each caption after the first starts, for captions of
    ``counts`` SentencePiece words each."""
    starts = word_starts(amap)
    return [starts[k] for k in np.cumsum(counts)[:-1] if k < len(starts)]


def chrf_recall(hyp: str, ref: str, order: int = 6) -> float:
    """chrF's recall (Popović 2015): the mean over n = 1..``order`` of the share of
    the reference's character n-grams (spaces removed) that the hypothesis holds
    (clipped counts), 0..100; orders the reference is too short for are left out."""
    h, r = hyp.replace(" ", ""), ref.replace(" ", "")
    recalls = []
    for n in range(1, order + 1):
        ref_grams = Counter(r[i : i + n] for i in range(len(r) - n + 1))
        if not ref_grams:
            continue
        hyp_grams = Counter(h[i : i + n] for i in range(len(h) - n + 1))
        matched = sum(min(c, hyp_grams[g]) for g, c in ref_grams.items())
        recalls.append(matched / sum(ref_grams.values()))
    return 100 * float(np.mean(recalls)) if recalls else float("nan")


def backward(amap: AttentionMap) -> tuple[float, int]:
    """(pieces the peak moves back, summed over target steps; target steps) of one
    sentence, the final ``</s>`` row left out."""
    peaks = amap.weights.mean((0, 1))[:-1].argmax(-1)  # (T−1,)
    moves = np.diff(peaks)
    return float(np.clip(-moves, 0, None).sum()), len(moves)


def diagonal(T: int, S: int) -> np.ndarray:
    """(T,) d_t = t·(S−1)/(T−1): where a monotone reading of S source positions stands
    at each of T target positions (0 for a single target position)."""
    return np.arange(T) * (S - 1) / max(T - 1, 1)


def aligned_positions(amap: AttentionMap, links: Alignment | None = None) -> np.ndarray:
    """(T,) the source piece position each target piece is aligned to: with gold word
    ``links``, the mean position of the pieces of the source words its word is linked
    to (NaN for an unlinked word and for ``</s>``); without, the diagonal."""
    if links is None:
        return diagonal(len(amap.tgt), len(amap.src))
    src_word = np.array(word_ids(amap.src[:-1]), dtype=np.int64)  # (S−1,) each piece's word
    tgt_word = np.array(word_ids(amap.tgt[:-1]), dtype=np.int64)  # (T−1,)
    n_src, n_tgt = src_word.max(initial=-1) + 1, tgt_word.max(initial=-1) + 1
    pieces = np.bincount(src_word, minlength=n_src)  # (n_src,) pieces of each source word
    places = np.bincount(src_word, weights=np.arange(src_word.size), minlength=n_src)  # Σ s
    kept = np.array([(i, j) for i, j in links if i < n_src and j < n_tgt], dtype=np.int64)
    i, j = kept.reshape(-1, 2).T  # the links within both sentences
    with np.errstate(invalid="ignore"):  # 0/0: a target word without a link
        mean = np.bincount(j, places[i], n_tgt) / np.bincount(j, pieces[i], n_tgt)  # (n_tgt,)
    return np.append(mean[tgt_word], np.nan)  # </s> has no word


def center_distance(amap: AttentionMap, links: Alignment | None = None) -> tuple[float, int]:
    """(Σ |p_t − aligned_t| over layers, centre heads and aligned target pieces; their
    count) of one sentence; (0, 0) for a variant without predicted centres."""
    if amap.centers is None:
        return 0.0, 0
    gap = np.abs(amap.centers - aligned_positions(amap, links))  # (L,Hc,T)
    known = ~np.isnan(gap)
    return float(gap[known].sum()), int(known.sum())


def ratio(pairs: np.ndarray) -> float:
    """Σ numerators / Σ denominators of (N,2) pairs; NaN where nothing is counted."""
    total = pairs.sum(0)
    return float(total[0] / total[1]) if total[1] else float("nan")


def frequency_bucket(count: int, edges: tuple[int, ...] = FREQUENCY_EDGES) -> int:
    """compare-mt's bucket of a word seen ``count`` times: 0 for count < edges[0]."""
    return bisect.bisect_right(edges, count)


def frequency_labels(edges: tuple[int, ...] = FREQUENCY_EDGES) -> list[str]:
    """compare-mt's bucket names: (1, 2, 3, 5) -> ["<1", "1", "2", "[3,5)", ">=5"]."""
    labels = [f"<{edges[0]}"]
    for lo, hi in itertools.pairwise(edges):
        labels.append(str(lo) if hi == lo + 1 else f"[{lo},{hi})")
    return [*labels, f">={edges[-1]}"]


def word_counts(lines: Iterable[str]) -> Counter[str]:
    """How often each 13a token occurs in ``lines`` (the training targets)."""
    counts: Counter[str] = Counter()
    for line in lines:
        counts.update(tokens_13a(line))
    return counts


def word_accuracy(
    hyps: list[str],
    refs: list[str],
    counts: Counter[str],
    edges: tuple[int, ...] = FREQUENCY_EDGES,
) -> np.ndarray:
    """(buckets, 3): per frequency bucket, output words matched in the reference,
    reference words and output words. An output word matches while the reference
    has unmatched copies of it, and counts in the bucket of the reference word it
    matched (compare-mt's rule)."""
    table = np.zeros((len(edges) + 1, 3), dtype=np.int64)
    for hyp, ref in zip(hyps, refs):
        ref_words = tokens_13a(ref)
        left = Counter(ref_words)
        for w in ref_words:
            table[frequency_bucket(counts[w], edges), 1] += 1
        for w in tokens_13a(hyp):
            bucket = frequency_bucket(counts[w], edges)
            table[bucket, 2] += 1
            if left[w] > 0:
                left[w] -= 1
                table[bucket, 0] += 1
    return table


def f_measure(table: np.ndarray) -> list[float]:
    """Each bucket's F-measure of :func:`word_accuracy`'s counts (0 with no match)."""
    out = []
    for matched, ref, hyp in table:
        if matched == 0:
            out.append(0.0)
            continue
        recall, precision = matched / ref, matched / hyp
        out.append(float(2 * precision * recall / (precision + recall)))
    return out
