"""A user's study metric, written outside the nmt package: the share of output words
copied from the source (a word of the translation that is also a word of its source
sentence), a rough view of source words left untranslated.

tests/compare/test_metrics.py names it in a spec's ``plugins`` and finds it in every
output of the study."""

from __future__ import annotations

from nmt.compare.metrics import SENTENCE_PLACES, TextMetric, register


class CopyRate(TextMetric):
    def pair(self, hyp: str, ref: str, src: str) -> tuple[float, float]:
        source, words = set(src.split()), hyp.split()
        return sum(w in source for w in words), len(words)


register(CopyRate("copy_rate", "copied", 3, "sentence", SENTENCE_PLACES))
