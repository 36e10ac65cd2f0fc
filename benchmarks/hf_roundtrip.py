"""The Hugging Face export against ``nmt translate`` on one split: how many outputs
are identical (greedy: all, by construction; beam: transformers' own search), the
BLEU of each, and the time each takes.

    python benchmarks/hf_roundtrip.py runs/multi30k-de-en --split test_2016_flickr
    python benchmarks/hf_roundtrip.py runs/toy --split test --beam 1 --beam 5

Needs the ``hf`` extra. The run is exported to a temporary directory (``nmt export
--format hf``) and loaded as a user would, with ``AutoModelForSeq2SeqLM`` and
``AutoTokenizer`` (``trust_remote_code=True``). transformers translates sentences
of one length limit together (``max_new_tokens`` is one number per call: the
export's card gives nmt's formula), in batches of ``--batch``; nmt as ``nmt
translate`` does. Identity is counted on target ids.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch
from common import user_errors
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from nmt.data.pipeline import load_split
from nmt.data.vocab import EOS, PAD
from nmt.decoding.metrics import bleu
from nmt.decoding.search import translate_lines
from nmt.export.huggingface import export_hf
from nmt.model.load import load_model


def hf_translate(out: Path, src: list[str], beam: int, batch: int) -> list[list[int]]:
    """Target ids (no ``<s>``, ``</s>``, padding) of each source line."""
    tokenizer = AutoTokenizer.from_pretrained(out, trust_remote_code=True)
    model = AutoModelForSeq2SeqLM.from_pretrained(out, trust_remote_code=True)
    limit = json.loads((out / "nmt-export.json").read_text())["max_new_tokens"]
    ids = tokenizer(src)["input_ids"]
    groups: dict[int, list[int]] = defaultdict(list)
    for i, s in enumerate(ids):
        groups[min(int(limit["a"] * len(s) + limit["b"]), limit["cap"])].append(i)
    result: list[list[int]] = [[] for _ in src]
    with torch.inference_mode():
        for most, members in groups.items():
            for k in range(0, len(members), batch):
                chunk = members[k : k + batch]
                inputs = tokenizer([src[i] for i in chunk], return_tensors="pt", padding=True)
                outputs = model.generate(**inputs, num_beams=beam, max_new_tokens=most)
                for i, row in zip(chunk, outputs.tolist()):
                    result[i] = [t for t in row[1:] if t not in (EOS, PAD)]
    return result


@user_errors
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="run directory or checkpoint")
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--data", default=None, help="override data.dir of the recipe")
    p.add_argument("--beam", type=int, action="append", help="beam sizes (default 1 and 5)")
    p.add_argument("--batch", type=int, default=64, help="sentences per generate call")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = p.parse_args()
    loaded = load_model(args.run, torch.device("cpu"))
    data = loaded.cfg.data
    if args.data:
        data = dataclasses.replace(data, dir=args.data)
    src, refs = load_split(data, args.split)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out, kind = export_hf(Path(args.run), Path(tmp) / "hf")
        for beam in args.beam or [1, 5]:
            cfg = dataclasses.replace(loaded.cfg.decode, beam=beam, n_best=1)
            start = time.perf_counter()
            with torch.inference_mode():
                ours = translate_lines(
                    loaded.model,
                    loaded.vocabs.src,
                    loaded.vocabs.tgt,
                    src,
                    cfg,
                    torch.device("cpu"),
                )
            nmt_s = time.perf_counter() - start
            start = time.perf_counter()
            theirs = hf_translate(out, src, beam, args.batch)
            hf_s = time.perf_counter() - start
            same = sum(h[0].tokens == t for h, t in zip(ours, theirs))
            text = loaded.vocabs.tgt.decode(theirs)
            row = {
                "class": kind,
                "beam": beam,
                "sentences": len(src),
                "identical": same,
                "bleu_nmt": bleu([h[0].text for h in ours], refs),
                "bleu_hf": bleu(text, refs),
                "seconds_nmt": nmt_s,
                "seconds_hf": hf_s,
            }
            rows.append(row)
            print(
                f"{kind} beam {beam}: {same}/{len(src)} identical; BLEU nmt "
                f"{row['bleu_nmt']:.2f}, transformers {row['bleu_hf']:.2f}; "
                f"{nmt_s:.1f} s and {hf_s:.1f} s"
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
