"""Gold word alignments of the training pairs, as piece-level targets for guided
alignment (``train.alignment``; nmt.training.guided_alignment).

Alignments are Pharaoh ``i-j`` lines (source word i, target word j, 0-based) over
whitespace words; a piece that starts with "▁" starts a word, the grouping
``compare`` uses for AER (nmt.data.alignment.word_ids). Each target piece is aligned
to every piece of the source words its word is linked to; a row with links sums
to 1 (Garg et al. 2019 normalise the alignment matrix so), a row without any
(an unaligned word, </s>) is all zero and not supervised.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from nmt.data.alignment import read_alignments
from nmt.data.corpus import n_lines
from nmt.data.vocab import Vocab
from nmt.errors import NmtError


def word_starts(vocab: Vocab) -> np.ndarray:
    """(V,) whether each piece starts a word."""
    return np.array([vocab.id_to_piece(i).startswith("▁") for i in range(len(vocab))])


def piece_words(ids: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """The word index of each piece (the first piece starts word 0 in any case)."""
    begins = starts[np.asarray(ids, dtype=np.int64)]
    begins[:1] = True
    return np.cumsum(begins) - 1


class GoldAlignments:
    """Each training pair's word links, (L,2) arrays of (source word, target word)."""

    def __init__(self, links: list[np.ndarray], src: Vocab, tgt: Vocab) -> None:
        self.links = links
        self.src_starts, self.tgt_starts = word_starts(src), word_starts(tgt)

    @classmethod
    def read(
        cls, path: Path, lines: np.ndarray, total: int, src: Vocab, tgt: Vocab
    ) -> GoldAlignments:
        """The alignments of the pairs at ``lines`` of a split of ``total`` lines;
        a malformed line, or a file of another length, is an error naming it."""
        if not path.is_file():
            raise NmtError(f"{path}: no such alignment file (train.alignment.file)")
        every = read_alignments(path)
        if len(every) != total:
            raise NmtError(f"{path}: {n_lines(len(every))}, but the training split has {total:,}")
        links = [np.array(sorted(every[i]), dtype=np.int64).reshape(-1, 2) for i in lines]
        return cls(links, src, tgt)

    def matrices(
        self, index: np.ndarray, src: Sequence[np.ndarray], tgt: Sequence[np.ndarray]
    ) -> Tensor:
        """(B,T,S) targets for a batch: T = longest target + 1 (the </s> row), S =
        longest source + 1 (the </s> column), as the batch's tensors."""
        T, S = max(map(len, tgt)) + 1, max(map(len, src)) + 1
        out = np.zeros((len(index), T, S), dtype=np.float32)
        for b, (i, s, t) in enumerate(zip(index, src, tgt)):
            sw, tw = piece_words(s, self.src_starts), piece_words(t, self.tgt_starts)
            links = self.links[i]
            inside = (links[:, 0] <= sw[-1]) & (links[:, 1] <= tw[-1])  # words that exist
            words = np.zeros((sw[-1] + 1, tw[-1] + 1), dtype=bool)
            words[links[inside, 0], links[inside, 1]] = True
            out[b, : len(t), : len(s)] = words[sw][:, tw].T  # (t,s)
        sums = out.sum(-1, keepdims=True)
        return torch.from_numpy(np.divide(out, sums, out=np.zeros_like(out), where=sums > 0))
