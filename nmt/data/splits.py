"""Splits made from other splits, in memory: long inputs from real parallel data.

A name of a dev or test split may carry one suffix:

- ``NAME*K`` (K ≥ 1): every K consecutive pairs of NAME joined into one, both
  sides in order, separated by a space; the last N mod K pairs, too few to make a
  whole group, are left out. ``test_2016_flickr*3`` has ~40-word inputs where
  the captions have ~13, beyond any training pair.
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
LONGER = re.compile(r"(?P<base>.+)>(?P<n>[0-9]+)")


def base_split(split: str) -> str:
    """The split whose files a (possibly derived) split reads."""
    found = JOINED.fullmatch(split) or LONGER.fullmatch(split)
    return found.group("base") if found else split


# A bound on the K of NAME*K and the N of NAME>N (far beyond any corpus), checked on
# the digits, before they are read as a number
MAX_DIGITS = 9


def _number(split: str, digits: str, what: str) -> int:
    if len(digits.lstrip("0")) > MAX_DIGITS:
        raise NmtError(f"split {split[:60]!r}: {what} must be at most {10**MAX_DIGITS - 1:,}")
    return int(digits)


def derive(split: str, src: list[str], tgt: list[str]) -> tuple[list[str], list[str]]:
    """The pairs of ``split`` from the (source, target) lines of its base split."""
    if joined := JOINED.fullmatch(split):
        k = _number(split, joined.group("k"), "K in NAME*K")
        if k < 1:
            raise NmtError(f"split {split!r}: K in NAME*K must be at least 1")
        return join(src, k), join(tgt, k)
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


def join(lines: list[str], k: int) -> list[str]:
    """Every ``k`` consecutive lines as one; a last group of fewer is left out."""
    whole = len(lines) - len(lines) % k
    return [" ".join(s.strip() for s in lines[i : i + k]) for i in range(0, whole, k)]


def word_count(line: str) -> int:
    """Whitespace-separated words: the length unit of the length buckets and of
    ``data.train_max_words``."""
    return len(line.split())
