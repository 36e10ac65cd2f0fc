"""A synthetic parallel corpus with gold word alignments, from a synchronous grammar.

Two invented languages ``src`` and ``tgt`` share one meaning; the grammar
generates both sides together and records which source word produced which
target words (Pharaoh ``i-j`` pairs, 0-based). It exercises what attention
must learn:

- local reordering: source ``DET N ADJ`` -> target ``DET ADJ N``; source
  prepositions -> target postpositions (``P NP`` -> ``NP P``);
- long-distance reordering: subordinate clauses are verb-final in the target
  (``ke SUBJ V OBJ`` -> ``sa SUBJ OBJ V``, the object may be long);
- one-to-many alignments: a plural noun is one source word but noun + plural
  particle in the target; a past-tense verb is one source word but auxiliary +
  verb in the target;
- lengths from 3 to 40 source words in training, and a ``test_long`` split
  longer than anything in training.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from nmt.errors import NmtError
from nmt.io.files import write_text

TRAIN_MAX_LEN = 40  # source words; test_long is strictly longer
LONG_MIN_LEN = 45


@dataclass
class Phrase:
    src: list[str] = field(default_factory=list)
    tgt: list[str] = field(default_factory=list)
    align: list[tuple[int, int]] = field(default_factory=list)

    def __add__(self, other: Phrase) -> Phrase:
        """Concatenate both sides in the same order (monotone)."""
        ns, nt = len(self.src), len(self.tgt)
        return Phrase(
            self.src + other.src,
            self.tgt + other.tgt,
            self.align + [(i + ns, j + nt) for i, j in other.align],
        )


def word(src: str | None, tgt: list[str]) -> Phrase:
    """One source word (or none) aligned to each of its target words."""
    if src is None:
        return Phrase([], list(tgt), [])
    return Phrase([src], list(tgt), [(0, j) for j in range(len(tgt))])


def swap(first: Phrase, second: Phrase) -> Phrase:
    """Source order first+second, target order second+first (a reordering)."""
    ns, nt = len(first.src), len(second.tgt)
    return Phrase(
        first.src + second.src,
        second.tgt + first.tgt,
        [(i, j + nt) for i, j in first.align] + [(i + ns, j) for i, j in second.align],
    )


def _words(
    rng: random.Random, onsets: str, vowels: str, codas: str, n: int, taken: set[str]
) -> list[str]:
    out = []
    while len(out) < n:
        syllables = rng.choice((2, 2, 3))
        w = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(syllables))
        w += rng.choice(codas)
        if w not in taken:
            taken.add(w)
            out.append(w)
    return out


class Lexicon:
    """Fixed invented vocabularies (the same for every corpus seed)."""

    def __init__(self) -> None:
        rng = random.Random(20150817)  # fixed: every toy corpus speaks the same languages
        taken = {"ke", "sa", "e", "und", "ni", "wo", "lo", "la", "ti", "to"}

        def pairs(n: int) -> list[tuple[str, str]]:
            src = _words(rng, "bdgklmnprstv", "aeiou", ["", "", "n"], n, taken)
            tgt = _words(rng, "fhjkqwxyz", "aeiouy", ["", "r", "x"], n, taken)
            return list(zip(src, tgt))

        self.nouns = pairs(40)
        self.adjectives = pairs(20)
        self.verbs = pairs(20)  # transitive
        self.intransitive = pairs(10)
        self.say_verbs = pairs(5)  # take a subordinate clause
        self.prepositions = pairs(6)  # postpositions in the target
        self.determiners = [("lo", "ti"), ("la", "to")]


class Grammar:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lex = Lexicon()

    def pick(self, options: list[tuple[str, str]]) -> tuple[str, str]:
        return self.rng.choice(options)

    def noun_phrase(self, depth: int) -> Phrase:
        r = self.rng
        det = word(*self._one(self.pick(self.lex.determiners)))
        src_n, tgt_n = self.pick(self.lex.nouns)
        noun = (
            word(src_n + "i", [tgt_n, "ni"])
            if r.random() < 0.3  # plural: one-to-two
            else word(src_n, [tgt_n])
        )
        np = det + (swap(noun, self._adjective()) if r.random() < 0.4 else noun)
        if depth > 0 and r.random() < 0.25:
            np = np + self.prepositional(depth - 1)
        return np

    def _adjective(self) -> Phrase:
        return word(*self._one(self.pick(self.lex.adjectives)))

    @staticmethod
    def _one(pair: tuple[str, str]) -> tuple[str, list[str]]:
        return pair[0], [pair[1]]

    def prepositional(self, depth: int) -> Phrase:
        prep = word(*self._one(self.pick(self.lex.prepositions)))
        return swap(prep, self.noun_phrase(depth))  # preposition -> postposition

    def verb(self, options: list[tuple[str, str]]) -> Phrase:
        src, tgt = self.pick(options)
        if self.rng.random() < 0.3:
            return word(src + "ta", ["wo", tgt])  # past tense: auxiliary + verb
        return word(src, [tgt])

    def clause(self, depth: int) -> Phrase:
        r = self.rng
        subject = self.noun_phrase(depth)
        if depth > 0 and r.random() < 0.2:
            complement = word("ke", ["sa"]) + self.subordinate(depth - 1)
            return subject + self.verb(self.lex.say_verbs) + complement
        if r.random() < 0.2:
            return subject + self.verb(self.lex.intransitive)
        return subject + self.verb(self.lex.verbs) + self.noun_phrase(depth)

    def subordinate(self, depth: int) -> Phrase:
        """Verb-final in the target: SUBJ V OBJ -> SUBJ OBJ V."""
        subject = self.noun_phrase(depth)
        return subject + swap(self.verb(self.lex.verbs), self.noun_phrase(depth))

    def sentence(self, clauses: int) -> Phrase:
        out = self.clause(depth=2)
        for _ in range(clauses - 1):
            out = out + word("e", ["und"]) + self.clause(depth=2)
        return out


def generate(
    n: int, seed: int, min_len: int, max_len: int, clauses: tuple[int, int]
) -> list[Phrase]:
    """``n`` sentence pairs whose source length lies in [min_len, max_len]."""
    rng = random.Random(seed)
    grammar = Grammar(rng)
    out: list[Phrase] = []
    while len(out) < n:
        phrase = grammar.sentence(rng.randint(*clauses))
        if min_len <= len(phrase.src) <= max_len:
            out.append(phrase)
    return out


SPLITS = {  # name: (share of --size, seed offset, min_len, max_len, clauses per sentence)
    "train": (1.0, 0, 3, TRAIN_MAX_LEN, (1, 4)),
    "val": (0.05, 1, 3, TRAIN_MAX_LEN, (1, 4)),
    "test": (0.05, 2, 3, TRAIN_MAX_LEN, (1, 4)),
    "test_long": (0.02, 3, LONG_MIN_LEN, 90, (5, 8)),
}


def write_corpus(out_dir: str | Path, size: int = 12000, seed: int = 1) -> dict[str, int]:
    """Write ``{split}.src``, ``{split}.tgt`` and ``{split}.align`` for every split.

    A file already there is replaced only by the same text (regenerating a corpus
    is harmless); one with other text, a user's own corpus perhaps, is an error
    before anything is written."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise NmtError(f"{out_dir}: a file, not a directory")
    counts, files = {}, {}
    for split, (share, offset, lo, hi, clauses) in SPLITS.items():
        n = max(1, round(size * share))
        pairs = generate(n, seed * 1000 + offset, lo, hi, clauses)
        for ext, lines in (
            ("src", [" ".join(p.src) for p in pairs]),
            ("tgt", [" ".join(p.tgt) for p in pairs]),
            ("align", [" ".join(f"{i}-{j}" for i, j in sorted(p.align)) for p in pairs]),
        ):
            files[out_dir / f"{split}.{ext}"] = "\n".join(lines) + "\n"
        counts[split] = n
    for path, text in files.items():
        if path.exists() and (not path.is_file() or path.read_bytes() != text.encode("utf-8")):
            raise NmtError(f"{path}: exists with other content; not overwritten")
    for path, text in files.items():
        write_text(path, text)
    return counts
