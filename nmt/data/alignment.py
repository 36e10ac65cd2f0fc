"""Word alignments from cross-attention, and their alignment error rate (AER).

Attention runs over SentencePiece pieces; gold alignments (Pharaoh ``i-j``: source word
i, target word j, 0-based) are over whitespace words. A piece that starts with "▁"
starts a word. Each target word is aligned to the source word that receives the most
attention, averaged over the target word's pieces and summed over the source word's
pieces — the argmax extraction used for attention by Garg et al. (2019, "Jointly
Learning to Align and Translate with Transformer Models").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nmt.data.corpus import read_lines
from nmt.errors import NmtError, shown

Alignment = set[tuple[int, int]]  # {(source word, target word)}


def word_ids(pieces: list[str]) -> list[int]:
    """The word index of each piece: ["▁a", "b", "▁c"] -> [0, 0, 1]."""
    ids, word = [], -1
    for piece in pieces:
        if piece.startswith("▁") or word < 0:
            word += 1
        ids.append(word)
    return ids


def group(weights: np.ndarray, src_words: list[int], tgt_words: list[int]) -> np.ndarray:
    """Piece-level attention (T,S) -> word-level (Tw,Sw): mean over a target word's
    pieces, sum over a source word's pieces (each row stays a distribution)."""
    tw, sw = max(tgt_words) + 1, max(src_words) + 1
    cols = np.zeros((weights.shape[1], sw))  # (S,Sw)
    cols[np.arange(len(src_words)), src_words] = 1.0
    rows = np.zeros((tw, weights.shape[0]))  # (Tw,T)
    rows[tgt_words, np.arange(len(tgt_words))] = 1.0
    rows /= rows.sum(1, keepdims=True)
    return rows @ weights @ cols


def attention_alignment(
    weights: np.ndarray, src_pieces: list[str], tgt_pieces: list[str]
) -> Alignment:
    """weights (T,S) over pieces (without </s>) -> the argmax alignment of every
    target word."""
    words = group(weights, word_ids(src_pieces), word_ids(tgt_pieces))  # (Tw,Sw)
    return {(int(i), j) for j, i in enumerate(words.argmax(1))}


NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def grow_diag_final_and(forward: Alignment, reverse: Alignment) -> Alignment:
    """Symmetrise two directional alignments (Koehn et al. 2003; Moses' default):
    start from their intersection, grow into neighbouring (also diagonal) links of
    their union that align a word not yet aligned, then add links of either
    direction whose two words are both still unaligned. As in Moses' pseudo-code,
    each sweep visits the links in grid order (source word, then target word),
    those it adds on the way included: which links grow first decides which words
    are still unaligned."""
    links, union = forward & reverse, forward | reverse
    grid = sorted(union)  # every link there is or will be, in sweep order

    def unaligned(i: int, j: int) -> tuple[bool, bool]:
        return all(a != i for a, _ in links), all(b != j for _, b in links)

    grew = True
    while grew:
        grew = False
        for i, j in (link for link in grid if link in links):
            for di, dj in NEIGHBOURS:
                link = (i + di, j + dj)
                if link in union and link not in links and any(unaligned(*link)):
                    links.add(link)
                    grew = True
    for direction in (forward, reverse):
        for link in sorted(direction):
            if all(unaligned(*link)):
                links.add(link)
    return links


def ascii_digits(text: str) -> bool:
    """Whether ``text`` is a non-empty run of 0-9 (``str.isdigit`` also takes "²" and
    other scripts' digits, which ``int`` refuses or reads as numbers)."""
    return text.isascii() and text.isdigit()


def parse_pharaoh(line: str, where: str) -> Alignment:
    """``"0-0 1-2"`` -> {(0, 0), (1, 2)}; a malformed pair is an error naming ``where``."""
    out = set()
    for pair in line.split():
        i, sep, j = pair.partition("-")
        if not (sep and ascii_digits(i) and ascii_digits(j)):
            raise NmtError(f"{where}: {shown(pair)} is not an i-j alignment pair")
        if max(len(i), len(j)) > 9:  # a word index past any sentence (and past int64)
            raise NmtError(f"{where}: {shown(pair)}: a word index of more than 9 digits")
        out.add((int(i), int(j)))
    return out


def format_pharaoh(links: Alignment) -> str:
    """{(1, 2), (0, 0)} -> ``"0-0 1-2"`` (sorted by source, then target word)."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))


def read_alignments(path: Path) -> list[Alignment]:
    return [parse_pharaoh(line, f"{path}:{n}") for n, line in enumerate(read_lines(path), 1)]


def aer(predicted: list[Alignment], gold: list[Alignment]) -> float:
    """Alignment error rate (Och & Ney 2003) with every gold link sure (S = P):
    1 - 2|A∩G| / (|A| + |G|), pooled over the corpus."""
    hits = sum(len(a & g) for a, g in zip(predicted, gold))
    total = sum(len(a) + len(g) for a, g in zip(predicted, gold))
    return 1.0 - 2.0 * hits / total if total else 0.0
