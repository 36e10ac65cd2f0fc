"""Token-budget batches with length bucketing, deterministic per (seed, epoch)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from nmt.data.gold_alignments import GoldAlignments
from nmt.data.vocab import BOS, EOS, PAD


@dataclass(frozen=True)
class Batch:
    src: Tensor  # (B,S) source ids + EOS, padded
    tgt_in: Tensor  # (B,T) BOS + target ids, padded
    tgt_out: Tensor  # (B,T) target ids + EOS, padded
    index: Tensor  # (B,) positions of these pairs in the dataset
    # (B,T,S) gold alignment of each target position (row, sums to 1 where a link
    # exists) over the source positions, under guided alignment (train.alignment)
    align: Tensor | None = None

    @property
    def tgt_tokens(self) -> int:
        return int((self.tgt_out != PAD).sum())

    def to(self, device: torch.device) -> Batch:
        return Batch(
            *(
                None if t is None else t.to(device, non_blocking=True)
                for t in (self.src, self.tgt_in, self.tgt_out, self.index, self.align)
            )
        )


def pad(seqs: Sequence[Sequence[int]], prefix: list[int] = (), suffix: list[int] = ()) -> Tensor:
    """Ragged id sequences -> (N, L) padded with PAD, each wrapped in prefix/suffix."""
    p, q = len(prefix), len(suffix)
    out = np.full((len(seqs), max(map(len, seqs), default=-p - q) + p + q), PAD, dtype=np.int64)
    for row, seq in enumerate(seqs):
        n = len(seq)
        out[row, :p], out[row, p : p + n], out[row, p + n : p + n + q] = prefix, seq, suffix
    return torch.from_numpy(out)


def split_batches(order: np.ndarray, sizes: np.ndarray, batch_tokens: int) -> list[np.ndarray]:
    """Cut pair indices, in ``order``, into consecutive batches with
    ``n * max(size) <= batch_tokens``, where a pair's size is the longer side's length
    (a pair longer than the budget gets a batch of its own)."""
    bounds, start, longest = [], 0, 0
    for j, size in enumerate(sizes[order].tolist()):
        if j > start and (j - start + 1) * max(longest, size) > batch_tokens:
            bounds.append(j)
            start, longest = j, 0
        longest = max(longest, size)
    return np.split(order, bounds) if len(order) else []


def bucket(
    lengths: np.ndarray, batch_tokens: int, generator: torch.Generator | None = None
) -> list[np.ndarray]:
    """Group pair indices, given their (source, target) ``lengths`` (N,2), into
    batches of similar length: ``split_batches`` of the pairs sorted by the longer side's length
    (what the budget counts), then the target's, then the source's. The target side
    carries about two thirds of a step's work (the decoder and the output layer), so
    its padding costs most (figures in docs/performance.md). With a ``generator``,
    ties break at random, so batch composition varies between epochs. Every index
    appears once."""
    lengths = np.asarray(lengths, dtype=np.int64).reshape(-1, 2)
    n = len(lengths)
    noise = torch.rand(n, generator=generator).numpy() if generator else np.zeros(n)
    longest = lengths.max(1)
    order = np.lexsort((noise, lengths[:, 0], lengths[:, 1], longest))  # last key first
    return split_batches(order, longest, batch_tokens)


def keep_pairs(
    src: list[list[int]], tgt: list[list[int]], max_len: int
) -> tuple[list[int], int, int]:
    """The indices of the encoded pairs that training keeps, and how many were dropped
    as empty (a side with no piece) and as over-long (a side over ``max_len``)."""
    kept = [i for i, (s, t) in enumerate(zip(src, tgt)) if s and t]
    short = [i for i in kept if len(src[i]) <= max_len and len(tgt[i]) <= max_len]
    return short, len(src) - len(kept), len(kept) - len(short)


class Tokens:
    """One side's encoded sentences: their ids in one flat array, sentence i at
    ``ids[offsets[i]:offsets[i + 1]]`` (memory-mapped from the data cache, or in
    memory)."""

    def __init__(self, ids: np.ndarray, offsets: np.ndarray) -> None:
        self.ids, self.offsets = ids, offsets

    @classmethod
    def from_lists(cls, seqs: list[list[int]]) -> Tokens:
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        np.cumsum([len(s) for s in seqs], out=offsets[1:])
        ids = np.fromiter(itertools.chain.from_iterable(seqs), np.int64, int(offsets[-1]))
        return cls(ids, offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.ids[self.offsets[i] : self.offsets[i + 1]]

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


class ParallelData:
    """Encoded sentence pairs and their per-epoch batch plans. Batching reads only
    the (N,2) lengths array, so a memory-mapped corpus stays on disk but for the
    pairs of the batches collated."""

    def __init__(self, src: Tokens, tgt: Tokens) -> None:
        self.src, self.tgt = src, tgt
        self.lines: np.ndarray | None = None  # (N,) each pair's line in the split's files
        self.docs: np.ndarray | None = None  # (N,) each pair's document number, where known
        self.alignments: GoldAlignments | None = None  # attached under train.alignment
        # +1: EOS on the source, BOS/EOS on the shifted target.
        self.lengths = np.stack([src.lengths() + 1, tgt.lengths() + 1], 1).astype(np.int32)

    @classmethod
    def from_lists(cls, src: list[list[int]], tgt: list[list[int]]) -> ParallelData:
        return cls(Tokens.from_lists(src), Tokens.from_lists(tgt))

    def __len__(self) -> int:
        return len(self.src)

    def epoch_batches(
        self, batch_tokens: int, seed: int, epoch: int, bucketed: bool = True
    ) -> list[np.ndarray]:
        """The batch plan of ``epoch``, a pure function of its arguments: bucketed by
        length, then shuffled; or (``bucketed=False``) pairs shuffled, then cut in
        that order, as toolkits without bucketing do (more padding, mixed lengths)."""
        g = torch.Generator().manual_seed(seed * 100_003 + epoch)
        if not bucketed:
            order = torch.randperm(len(self), generator=g).numpy()
            return split_batches(order, self.lengths.max(1), batch_tokens)
        batches = bucket(self.lengths, batch_tokens, g)
        return [batches[i] for i in torch.randperm(len(batches), generator=g).tolist()]

    def collate(self, indices: Sequence[int]) -> Batch:
        index = np.asarray(indices, dtype=np.int64)
        src = [self.src[i] for i in index]
        tgt = [self.tgt[i] for i in index]
        align = None if self.alignments is None else self.alignments.matrices(index, src, tgt)
        return Batch(
            pad(src, suffix=[EOS]),
            pad(tgt, prefix=[BOS]),
            pad(tgt, suffix=[EOS]),
            torch.from_numpy(index),
            align,
        )

    def padding_fraction(self, batches: list[np.ndarray]) -> float:
        """Share of padded slots over source and target tensors of these batches."""
        real = padded = 0
        for b in batches:
            s, t = self.lengths[b, 0], self.lengths[b, 1]
            real += int(s.sum()) + int(t.sum())
            padded += len(b) * (int(s.max()) + int(t.max()))
        return 1.0 - real / max(padded, 1)
