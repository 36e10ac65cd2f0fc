"""Control alignments for guided alignment (``train.alignment.file``): the gold links
of a corpus's training split made wrong in a known way, so that a study can ask
*which* part of the supervision moves BLEU (docs/results.md, "Guided alignment: what
the supervision gives").

- ``shuffled``: each line's source word positions permuted at random (one permutation
  a line, drawn from ``--seed`` and the line's number): every supervised target word,
  and how many source words each is linked to, stay as in gold; which source words
  they are is lost. What is left is a loss of the same form that carries no
  correspondence, the "extra gradient signal of another kind".
- ``diagonal``: each gold link (i, j) moved to the source word at the target word's
  relative position, round(j·(S−1)/(T−1)) for S source and T target words: the same
  supervised target words, one link each, a monotone prior with no word identity.

Usage:

    python scripts/control_alignments.py shuffled CORPUS_DIR OUT.align [--seed 1] [--split train]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from nmt.data.alignment import Alignment, format_pharaoh, read_alignments
from nmt.data.corpus import read_lines
from nmt.errors import NmtError
from nmt.io.files import write_text


def shuffled(links: Alignment, n_src: int, rng: np.random.Generator) -> Alignment:
    """The links with their source positions permuted (n_src words)."""
    order = rng.permutation(n_src)
    return {(int(order[i]), j) for i, j in links}


def diagonal(links: Alignment, n_src: int, n_tgt: int) -> Alignment:
    """One link a gold-linked target word, to the source word at its relative position."""
    scale = (n_src - 1) / max(n_tgt - 1, 1)
    return {(round(j * scale), j) for j in {j for _, j in links}}


def control(kind: str, corpus: Path, split: str, seed: int) -> list[Alignment]:
    """Every line's control alignment; links past a line's words are an error."""
    src = read_lines(corpus / f"{split}.src")
    tgt = read_lines(corpus / f"{split}.tgt")
    gold = read_alignments(corpus / f"{split}.align")
    if not len(src) == len(tgt) == len(gold):
        raise NmtError(f"{corpus}: {split}.src, .tgt and .align differ in their line counts")
    out = []
    for n, (s, t, links) in enumerate(zip(src, tgt, gold)):
        n_src, n_tgt = len(s.split()), len(t.split())
        if any(i >= n_src or j >= n_tgt for i, j in links):
            raise NmtError(f"{corpus / f'{split}.align'}:{n + 1}: a link past the line's words")
        if kind == "shuffled":
            out.append(shuffled(links, n_src, np.random.default_rng([seed, n])))
        else:
            out.append(diagonal(links, n_src, n_tgt))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=["shuffled", "diagonal"])
    parser.add_argument("corpus", type=Path, help="a corpus directory with SPLIT.align")
    parser.add_argument("out", type=Path, help="the Pharaoh file to write")
    parser.add_argument("--split", default="train")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    try:
        lines = control(args.kind, args.corpus, args.split, args.seed)
    except NmtError as e:  # a damaged corpus: one line, nothing written
        sys.exit(f"error: {e}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text(args.out, "".join(format_pharaoh(a) + "\n" for a in lines))
    print(f"{args.out}: {len(lines):,} lines of {args.kind} links")


if __name__ == "__main__":
    main()
