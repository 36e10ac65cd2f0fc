"""Lines cut into sentences and put back together, for ``decode.split: sentences``
(``nmt translate --split sentences``): a model trained on single sentences stops
after about one sentence of a longer line, so each sentence is translated on its
own and the outputs are joined into one line per input line again.

The rules are pysbd's (Sadvilkar & Neumann 2020, "PySBD: Pragmatic Sentence
Boundary Disambiguation", NLP-OSS; the Golden Rules of the Pragmatic Segmenter),
chosen by boundary F1 on Multi30k's joined captions, Wikipedia zh–en articles and
TED talks against sentence-splitter's Moses rules and blingfire
(``benchmarks/segmenters.py``; the figures are in docs/benchmarks.md). A language
it has no rules for is refused, never guessed at.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nmt.errors import NmtError

Segment = Callable[[str], list[str]]
# languages written without a space between sentences: their outputs join with none
UNSPACED = ("zh", "ja")


def languages() -> list[str]:
    """The languages pysbd has sentence rules for (ISO 639-1 codes)."""
    from pysbd.languages import LANGUAGE_CODES

    return sorted(LANGUAGE_CODES)


def segmenter(lang: str, key: str = "decode.split_lang") -> Segment:
    """``line -> its sentences`` (stripped, none empty) by ``lang``'s rules; an error
    naming ``key`` for a language without rules."""
    try:
        import pysbd
    except ImportError:  # a dependency of nmt: only a broken install lacks it
        raise NmtError("sentence splitting needs pysbd: pip install pysbd") from None
    if lang not in languages():
        raise NmtError(
            f"{key} {lang!r}: no sentence rules for this language (pysbd has: "
            f"{', '.join(languages())}); set {key} to the source text's language, or "
            "translate line by line (decode.split: none)"
        )
    rules = pysbd.Segmenter(language=lang, clean=False)
    return lambda line: attached([s.strip() for s in rules.segment(line) if s.strip()])


def attached(pieces: list[str]) -> list[str]:
    """``pieces`` with each that holds no letter or digit joined to its neighbour:
    pysbd can leave a closing quotation mark after a sentence's full stop on its own
    (Chinese ``…。`` then ``”``; docs/results.md counts them on the Wikipedia zh–en
    test articles), which is nothing to translate. Such a piece goes onto the end of
    the sentence before it (a first one onto the start of the next), with no space,
    as it stood."""
    out: list[str] = []
    for piece in pieces:
        if out and not (_worded(piece) and _worded(out[-1])):
            out[-1] += piece
        else:
            out.append(piece)
    return out


def _worded(text: str) -> bool:
    return any(c.isalnum() for c in text)


def split_lines(lines: Sequence[str], segment: Segment) -> tuple[list[str], list[int]]:
    """Every line's sentences, in order, and the line each came from; a line with no
    sentence (empty, or white space) stays one empty "sentence", so that it still
    gets its output line."""
    sentences, owners = [], []
    for i, line in enumerate(lines):
        parts = segment(line) or [line.strip()]
        sentences += parts
        owners += [i] * len(parts)
    return sentences, owners


def joiner(lang: str) -> str:
    """What goes between the translations of one line's sentences in ``lang``."""
    return "" if lang in UNSPACED else " "
