"""Each epoch's training examples under ``data.join``: some pairs joined into longer
ones (Varis & Bojar 2021; Kondo et al. 2021), so that a model sees inputs of
several sentences, as a document-level toolkit's training on concatenated
sentences does.

An epoch's examples are groups of pair indices drawn from (train.seed, epoch):
:func:`groups`. :class:`JoinedTokens` reads a group's sentences from the
prepared corpus (memory-mapped) end to end when a batch is collated, so the
corpus is never copied; the batcher plans on the groups' lengths like any
other pairs'. A sentence-group model's examples have a separator between their
sentences (nmt.data.vocab.Vocab), on both sides.
"""

from __future__ import annotations

import numpy as np

from nmt.data.batching import ParallelData, Tokens
from nmt.errors import NmtError
from nmt.setup.data import JoinConfig


class JoinedTokens(Tokens):
    """One side of an epoch's examples: example e is the sentences
    ``base[members[starts[e]:starts[e + 1]]]`` end to end, with ``separator``
    between each two (None: nothing between them)."""

    def __init__(
        self, base: Tokens, members: np.ndarray, starts: np.ndarray, separator: int | None = None
    ) -> None:
        self.base, self.members, self.starts = base, members, starts
        self.separator = separator

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, e: int) -> np.ndarray:
        group = self.members[self.starts[e] : self.starts[e + 1]]
        if self.separator is None:
            return np.concatenate([self.base[i] for i in group])
        between = np.array([self.separator], dtype=self.base[int(group[0])].dtype)
        parts = [between if n % 2 else self.base[i] for i in group for n in (1, 0)][1:]
        return np.concatenate(parts)

    def lengths(self) -> np.ndarray:
        lengths = np.add.reduceat(self.base.lengths()[self.members], self.starts[:-1])
        if self.separator is None:
            return lengths
        return lengths + np.diff(self.starts) - 1  # one separator between each two


def groups(
    lengths: np.ndarray,
    cfg: JoinConfig,
    max_len: int,
    seed: int,
    epoch: int,
    docs: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(members, starts): the pairs of every example of the epoch, in the order of
    ``members``, example e at ``members[starts[e]:starts[e + 1]]``. lengths (N,2):
    the pairs' pieces on each side (without ``</s>`` or ``<s>``). A group that would
    take a side over ``max_len`` pieces keeps the most of its first pairs that stay
    within it (one at least), and under ``order: document`` (``docs`` (N,): each
    pair's document number) those of its first pair's document; each pair is in
    exactly one example."""
    n = len(lengths)
    ends = document_ends(docs) if cfg.order == "document" and docs is not None else None
    rng = np.random.default_rng([seed, epoch, 0x6A6F696E])  # "join": apart from other draws
    order = rng.permutation(n) if cfg.order == "random" else np.arange(n)
    joins = rng.random(n) < cfg.prob  # whether an example starting here joins
    sizes = rng.integers(2, cfg.max_k + 1, n)  # how many it joins
    ordered = lengths[order]  # (N,2)
    totals = np.concatenate([np.zeros((1, 2), np.int64), np.cumsum(ordered, 0)])  # (N+1,2)
    starts, i = [0], 0
    while i < n:
        k = min(int(sizes[i]) if joins[i] else 1, n - i)
        if ends is not None:  # never past the end of the pair's document
            k = min(k, int(ends[i]) - i)
        while k > 1 and (totals[i + k] - totals[i]).max() > max_len:
            k -= 1
        i += k
        starts.append(i)
    return order, np.asarray(starts, dtype=np.int64)


def document_ends(docs: np.ndarray) -> np.ndarray:
    """(N,) for each pair, the index one past the last pair of its document run."""
    docs = np.asarray(docs)
    change = np.flatnonzero(np.diff(docs) != 0) + 1  # where a new run starts
    bounds = np.concatenate([change, [len(docs)]])
    return bounds[np.searchsorted(bounds, np.arange(len(docs)), side="right")]


def joined(
    data: ParallelData,
    cfg: JoinConfig,
    max_len: int,
    seed: int,
    epoch: int,
    separators: tuple[int | None, int | None] = (None, None),
) -> ParallelData:
    """The epoch's examples of ``data``: its pairs, some joined (``cfg``); under
    ``order: document`` only within a document (``data.docs``, which the training
    split's ``.doc`` file gives). ``separators``: the (source, target) id put
    between joined sentences (a sentence-group model's), counted in ``max_len``."""
    if cfg.order == "document" and data.docs is None:
        raise NmtError(
            "data.join.order: document joins within documents, and the training split has "
            "no document ids (TRAIN.doc beside it: nmt data import writes it from a TSV's "
            "document column or an XML's docid)"
        )
    # with separators, each pair counts one more piece: its separator (the first
    # pair's is the one too many, so a group may fall one piece short of max_len)
    per_pair = 0 if separators == (None, None) else 1
    lengths = data.lengths - 1 + per_pair  # data.lengths count </s> (or <s>)
    members, starts = groups(lengths, cfg, max_len, seed, epoch, data.docs)
    src, tgt = separators
    return ParallelData(
        JoinedTokens(data.src, members, starts, src), JoinedTokens(data.tgt, members, starts, tgt)
    )
