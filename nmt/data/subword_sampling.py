"""Each epoch's training pairs under subword regularisation (``data.vocab.sampling``).

The prepared corpus (nmt.data.cache) holds each pair's deterministic pieces; an
epoch decodes them back to text and encodes it again with SentencePiece's
sampling (Kudo 2018), seeded by (train.seed, epoch, side). The draw is a pure
function of those, so ``--resume`` continues an epoch on the very segmentation
it started with, and every data-parallel rank draws the same one. Encoding runs
on one thread: SentencePiece's multi-threaded sampling is not reproducible.
"""

from __future__ import annotations

import sentencepiece as spm

from nmt.data.batching import ParallelData, Tokens
from nmt.data.vocab import Vocab
from nmt.setup.data import SubwordSampling

# SentencePiece's seed is an unsigned 32-bit int whose largest value, 2**32 - 1,
# means "seed from the random device": derived seeds stay below it.
SEEDS = 2**32 - 1


def resampled(
    data: ParallelData,
    src: Vocab,
    tgt: Vocab,
    cfg: SubwordSampling,
    seed: int,
    epoch: int,
    max_len: int,
) -> ParallelData:
    """``data`` with both sides segmented anew; a pair whose sampled pieces would
    be empty or longer than ``max_len`` on either side keeps its deterministic ones
    (so the epoch holds the same pairs)."""
    sides = []
    for k, (tokens, vocab) in enumerate(((data.src, src), (data.tgt, tgt))):
        text = vocab.sp.decode([tokens[i].tolist() for i in range(len(tokens))])
        spm.set_random_generator_seed(((seed * 100_003 + epoch) * 2 + k) % SEEDS)
        sides.append(
            vocab.sp.encode(
                text,
                enable_sampling=True,
                alpha=cfg.alpha,
                nbest_size=cfg.nbest_size,
                num_threads=1,
            )
        )
    for i, (s, t) in enumerate(zip(*sides)):
        if not (0 < len(s) <= max_len and 0 < len(t) <= max_len):
            sides[0][i], sides[1][i] = data.src[i].tolist(), data.tgt[i].tolist()
    out = ParallelData(Tokens.from_lists(sides[0]), Tokens.from_lists(sides[1]))
    out.lines, out.docs, out.alignments = data.lines, data.docs, data.alignments  # unchanged
    return out
