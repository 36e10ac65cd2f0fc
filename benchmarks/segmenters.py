"""Which sentence segmenter ``nmt translate --split sentences`` uses: each candidate
(pysbd, sentence-splitter's Moses rules, blingfire) cuts lines made of K consecutive
sentences whose boundaries are known, and this prints, per corpus and language, the
boundary precision, recall and F1 and the share of lines cut exactly into their K
sentences, and each candidate's speed.

The lines: Multi30k's test_2016_flickr captions joined K at a time (de, en); the
Wikipedia zh–en articles of docsub-zh-en, K consecutive sentences of one article (zh,
en); the TED talks of iwslt-ted-de-en, K consecutive segments of one talk (de, en; a
TED segment is sometimes two sentences, which lowers every candidate's precision
alike). Joined with a space, as ``NAME*K`` joins.

    python benchmarks/segmenters.py --shared ../shared/data --k 5

The figures and the choice are in docs/benchmarks.md ("Sentence segmenters").
"""

from __future__ import annotations

import argparse
import gzip
import re
import time
from collections.abc import Callable
from pathlib import Path

Segmenter = Callable[[str], list[str]]


def candidates(lang: str) -> dict[str, Segmenter | None]:
    """Each candidate's segmenter for ``lang``, None where it has no rules for it."""
    import blingfire
    import pysbd
    from sentence_splitter import SentenceSplitter

    from nmt.data.sentences import segmenter

    out: dict[str, Segmenter | None] = {}
    try:
        pysbd_seg = pysbd.Segmenter(language=lang, clean=False)
        out["pysbd"] = lambda text: [s.strip() for s in pysbd_seg.segment(text) if s.strip()]
        out["nmt (pysbd, pieces without a letter attached)"] = segmenter(lang)
    except ValueError:
        out["pysbd"] = None
    try:
        moses = SentenceSplitter(language=lang)
        out["sentence-splitter"] = moses.split
    except Exception:  # SentenceSplitterException: no rules for the language
        out["sentence-splitter"] = None
    out["blingfire"] = lambda text: [s for s in blingfire.text_to_sentences(text).split("\n") if s]
    return out


def multi30k(shared: Path, lang: str) -> list[list[str]]:
    path = shared / "multi30k" / f"test_2016_flickr.{lang}.gz"
    return [gzip.open(path, "rt", encoding="utf-8").read().splitlines()]


def docsub(shared: Path, lang: str) -> list[list[str]]:
    """Each article of dev.tsv.gz as its sentences, in order."""
    docs: dict[str, list[str]] = {}
    with gzip.open(shared / "docsub-zh-en" / "dev.tsv.gz", "rt", encoding="utf-8") as f:
        for line in f:
            title, _, _, zh, en = line.rstrip("\n").split("\t")
            docs.setdefault(title, []).append(zh if lang == "zh" else en)
    return list(docs.values())


def ted(shared: Path, lang: str) -> list[list[str]]:
    """Each talk of the IWSLT 2016 de–en dev and test sets as its segments."""
    talks = []
    for path in sorted((shared / "iwslt-ted-de-en").glob(f"IWSLT16.TED*.de-en.{lang}.xml.gz")):
        text = gzip.open(path, "rt", encoding="utf-8").read()
        for doc in re.findall(r"<doc .*?</doc>", text, flags=re.S):
            segs = re.findall(r"<seg id=\"\d+\">\s*(.*?)\s*</seg>", doc, flags=re.S)
            talks.append([s for s in segs if s])
    return talks


def joined(documents: list[list[str]], k: int) -> list[list[str]]:
    """Every run of K consecutive sentences of one document (the last ones of a
    document shorter than K are left out: every line here has K)."""
    return [d[i : i + k] for d in documents for i in range(0, len(d) - k + 1, k)]


def boundaries(parts: list[str], line: str) -> set[int]:
    """The character offsets in ``line`` where each part after the first begins."""
    out, at = set(), 0
    for part in parts:
        found = line.find(part, at)
        if found < 0:  # a segmenter that changed the text: compare what it kept
            found = at
        if at:
            out.add(found)
        at = found + len(part)
    return out


def score(segment: Segmenter, groups: list[list[str]]) -> dict[str, float]:
    tp = fp = fn = exact = 0
    start = time.perf_counter()
    for group in groups:
        line = " ".join(group)
        gold = boundaries(group, line)
        got = boundaries(segment(line), line)
        tp, fp, fn = tp + len(gold & got), fp + len(got - gold), fn + len(gold - got)
        exact += gold == got
    seconds = time.perf_counter() - start
    p, r = tp / max(tp + fp, 1), tp / max(tp + fn, 1)
    return {
        "precision": p,
        "recall": r,
        "f1": 2 * p * r / max(p + r, 1e-9),
        "exact": exact / len(groups),
        "lines_per_s": len(groups) / seconds,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=Path("../shared/data"))
    ap.add_argument("--k", type=int, default=5)
    args = ap.parse_args()
    corpora = {
        "multi30k": (multi30k, ("de", "en")),
        "docsub-zh-en": (docsub, ("zh", "en")),
        "iwslt-ted-de-en": (ted, ("de", "en")),
    }
    print("| corpus | lang | lines | segmenter | precision | recall | F1 | exact | lines/s |")
    print("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for corpus, (read, langs) in corpora.items():
        for lang in langs:
            groups = joined(read(args.shared, lang), args.k)
            for name, segment in candidates(lang).items():
                if segment is None:
                    print(f"| {corpus} | {lang} | {len(groups)} | {name} | no rules | | | | |")
                    continue
                s = score(segment, groups)
                print(
                    f"| {corpus} | {lang} | {len(groups)} | {name} | {s['precision']:.3f} | "
                    f"{s['recall']:.3f} | {s['f1']:.3f} | {s['exact']:.3f} | "
                    f"{s['lines_per_s']:,.0f} |"
                )


if __name__ == "__main__":
    main()
