"""Collect what docs/results.md's "Paragraphs" section cites from evaluated runs.

For each run and each evaluated split of the form NAME, NAME*K or NAME~K (as trained
and under other decodings, NAME*K@decode.split=sentences): BLEU, chrF and the length
ratio (output words / reference words, sacreBLEU's), recomputed from RUN/SPLIT.hyp
against the references (a split of another corpus, ``nmt evaluate --data``: BLEU and
chrF as results.json keeps them); and, for each joined split evaluated as trained
(NAME*K, NAME~K) whose base split NAME was evaluated too, the yardstick "NAME*K from
single outputs": the run's outputs of NAME (one sentence a line) joined as NAME*K joins
its lines (within documents for NAME~K) and scored against the references joined
alike. The same words scored over longer segments, it separates what translating a
line of K sentences changes from what scoring over longer lines does.

For each joined split decoded with ``decode.split=sentences`` (NAME*K@...), the lines
in groups by what the segmenter (the run's ``decode.split_lang``, else its source
language) made of the joined source: cut into as many pieces as sentences were joined
("cut into each"), into fewer ("cut into fewer": a sentence without final punctuation
runs into the next) or into more ("cut into more": a sentence cut in two). For each
group: the lines, those whose output equals the single outputs joined, and both
outputs' BLEU and chrF against the references. It tells how much of what
split-then-translate loses against the single outputs the segmenter's boundaries
account for. Usage:

    python scripts/paragraph_figures.py OUT.json RUN [RUN ...]
"""

from __future__ import annotations

import glob
import json
import sys
from pathlib import Path

import sacrebleu

from nmt.compare.analysis import recipe_of
from nmt.data.corpus import read_documents
from nmt.data.pipeline import load_split
from nmt.data.sentences import segmenter
from nmt.data.splits import JOINED, base_split, derive, groups, needs_documents
from nmt.decoding.evaluate import read_results


def figures(hyps: list[str], refs: list[str]) -> dict[str, float]:
    bleu = sacrebleu.corpus_bleu(hyps, [refs])
    chrf = sacrebleu.corpus_chrf(hyps, [refs])
    return {"bleu": bleu.score, "chrf": chrf.score, "ratio": bleu.sys_len / bleu.ref_len}


def run_figures(run: Path) -> dict[str, dict[str, float]]:
    cfg = recipe_of(run)
    out = {}
    for hyp in sorted(run.glob("*.hyp")):
        name = hyp.stem
        split, _, tag = name.partition("@")
        if "data=" in tag:  # another corpus's split (nmt evaluate --data): as evaluated
            kept = read_results(run)[name]
            out[name] = {"bleu": kept["bleu"], "chrf": kept["chrf"]}
            continue
        _, refs = load_split(cfg.data, split)
        out[name] = figures(hyp.read_text(encoding="utf-8").splitlines(), refs)
    joined = [n for n in out if JOINED.fullmatch(n) or needs_documents(n)]
    for split in joined:
        base = base_split(split)
        if not (single := run / f"{base}.hyp").is_file():
            print(f"{run}: no yardstick for {split}: {base} was not evaluated", file=sys.stderr)
            continue
        src, refs = load_split(cfg.data, base)
        hyps = single.read_text(encoding="utf-8").splitlines()
        docs = read_documents(Path(cfg.data.dir), base, len(src))  # None without a .doc file
        single, joined_refs = derive(split, hyps, refs, docs)
        out[f"{split} from single outputs"] = figures(single, joined_refs)
        joined_src, made = derive(split, src, refs, docs)[0], groups(split, len(src), docs)
        for cut in sorted(run.glob(f"{glob.escape(split)}@*.hyp")):
            overrides = dict(o.split("=", 1) for o in cut.stem.partition("@")[2].split(","))
            if overrides.get("decode.split") == "sentences" and "data" not in overrides:
                lang = overrides.get("decode.split_lang", cfg.decode.split_lang)
                seg = segmenter(lang or cfg.data.src_lang)
                pieces = [len(seg(line)) - len(group) for line, group in zip(joined_src, made)]
                out |= by_segmentation(cut, pieces, single, joined_refs)
    return out


CUTS = {0: "cut into each", -1: "cut into fewer", 1: "cut into more"}  # by the sign


def by_segmentation(
    cut: Path, pieces: list[int], single: list[str], refs: list[str]
) -> dict[str, dict[str, float]]:
    """A split-then-translate decoding (``cut``) and the ``single`` outputs joined
    alike, against ``refs``, on the lines the segmenter cut into each joined sentence,
    into fewer pieces and into more (``pieces``: each line's pieces less its sentences)."""
    outputs = cut.read_text(encoding="utf-8").splitlines()
    out = {}
    for sign, name in CUTS.items():
        rows = [i for i, n in enumerate(pieces) if (n > 0) - (n < 0) == sign]
        if not rows:
            continue
        refs_of = [refs[i] for i in rows]
        out[f"{cut.stem}, {name}"] = {
            "lines": len(rows),
            "same_as_single": sum(outputs[i] == single[i] for i in rows),
            **figures([outputs[i] for i in rows], refs_of),
            **{f"single_{k}": v for k, v in figures([single[i] for i in rows], refs_of).items()},
        }
    return out


def main() -> None:
    target, runs = Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]]
    data = {str(run): run_figures(run) for run in runs}
    target.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
