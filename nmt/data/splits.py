"""Splits made from other splits, in memory: long inputs from real parallel data.

A name of a dev or test split may carry one suffix:

- ``NAME*K`` (K ≥ 1): every K consecutive pairs of NAME joined into one, both
  sides in order, separated by a space; the last N mod K pairs, too few to make a
  whole group, are left out. ``test_2016_flickr*3`` has ~40-word inputs where
  the captions have ~13, beyond any training pair.
- ``NAME~K`` (K ≥ 1): K consecutive sentences of one document at a time, joined as
  ``*K`` joins them, never across a document's end (the ids in ``NAME.doc``, one a
  line, which ``nmt data import`` writes: a TSV's document column, an XML's
  docid). A document's last group holds what is left (fewer than K where its
  length is no multiple of K), so every pair is in one line; a document is a run
  of consecutive lines with one id.
- ``NAME>N`` (N ≥ 0): the pairs of NAME whose source has more than N words, such as
  the long pairs of the training split that ``data.train_max_words: N`` holds out
  of training ("train short, test long", as Varis & Bojar 2021 study).

Nothing is written into the data directory; outputs are named by the whole name
(``RUN/test_2016_flickr*3.hyp``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from nmt.errors import NmtError

JOINED = re.compile(r"(?P<base>.+)\*(?P<k>[0-9]+)")
IN_DOCUMENTS = re.compile(r"(?P<base>.+)~(?P<k>[0-9]+)")
LONGER = re.compile(r"(?P<base>.+)>(?P<n>[0-9]+)")


def base_split(split: str) -> str:
    """The split whose files a (possibly derived) split reads."""
    found = JOINED.fullmatch(split) or IN_DOCUMENTS.fullmatch(split) or LONGER.fullmatch(split)
    return found.group("base") if found else split


def needs_documents(split: str) -> bool:
    """Whether ``split`` reads its base split's document ids (``NAME~K``)."""
    return IN_DOCUMENTS.fullmatch(split) is not None


# A bound on the K of NAME*K and the N of NAME>N (far beyond any corpus), checked on
# the digits, before they are read as a number
MAX_DIGITS = 9


def _number(split: str, digits: str, what: str) -> int:
    if len(digits.lstrip("0")) > MAX_DIGITS:
        raise NmtError(f"split {split[:60]!r}: {what} must be at most {10**MAX_DIGITS - 1:,}")
    return int(digits)


def groups(split: str, n: int, docs: list[str] | None = None) -> list[range] | None:
    """The base split's lines each line of a joined split (``NAME*K``, ``NAME~K``)
    is made of, for a base of ``n`` lines (``docs``: its document ids, which
    ``NAME~K`` needs); None for any other split."""
    if joined := JOINED.fullmatch(split):
        k = _number(split, joined.group("k"), "K in NAME*K")
        if k < 1:
            raise NmtError(f"split {split!r}: K in NAME*K must be at least 1")
        return [range(i, i + k) for i in range(0, n - n % k, k)]
    if not (within := IN_DOCUMENTS.fullmatch(split)):
        return None
    k = _number(split, within.group("k"), "K in NAME~K")
    base = within.group("base")
    if k < 1:
        raise NmtError(f"split {split!r}: K in NAME~K must be at least 1")
    if docs is None:
        raise NmtError(
            f"split {split!r}: NAME~K joins within documents, and {base} has no document "
            f"ids ({base}.doc: nmt data import writes it from a TSV's document column or "
            "an XML's docid); NAME*K joins regardless of documents"
        )
    runs = documents(docs)
    longest = max(len(r) for r in runs)
    if k > longest:
        raise NmtError(
            f"split {split!r}: K {k} is larger than any document of {base} (the longest has "
            f"{longest:,} sentences)"
        )
    return [range(i, min(i + k, r.stop)) for r in runs for i in range(r.start, r.stop, k)]


def documents(docs: list[str]) -> list[range]:
    """The runs of consecutive lines with one document id."""
    starts = [i for i in range(len(docs)) if i == 0 or docs[i] != docs[i - 1]]
    return [range(a, b) for a, b in zip(starts, [*starts[1:], len(docs)])]


def derive(
    split: str, src: list[str], tgt: list[str], docs: list[str] | None = None
) -> tuple[list[str], list[str]]:
    """The pairs of ``split`` from the (source, target) lines of its base split
    (``docs``: their document ids, for ``NAME~K``)."""
    if (made := groups(split, len(src), docs)) is not None:
        return join(src, made), join(tgt, made)
    if longer := LONGER.fullmatch(split):
        n = _number(split, longer.group("n"), "N in NAME>N")
        return pairs_where(src, tgt, lambda length: length > n)
    return src, tgt


def shorter(src: list[str], tgt: list[str], n: int) -> tuple[list[str], list[str]]:
    """The pairs whose source has at most ``n`` words (``data.train_max_words``)."""
    return pairs_where(src, tgt, lambda length: length <= n)


def pairs_where(
    src: list[str], tgt: list[str], keep: Callable[[int], bool]
) -> tuple[list[str], list[str]]:
    """The pairs whose source length in words ``keep`` accepts."""
    kept = [i for i, line in enumerate(src) if keep(word_count(line))]
    return [src[i] for i in kept], [tgt[i] for i in kept]


def join(lines: list[str], made: list[range]) -> list[str]:
    """The lines of each group as one, separated by a space."""
    return [" ".join(lines[i].strip() for i in group) for group in made]


def word_count(line: str) -> int:
    """Whitespace-separated words: the length unit of the length buckets and of
    ``data.train_max_words``."""
    return len(line.split())
