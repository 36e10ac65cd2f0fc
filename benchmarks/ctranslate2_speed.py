"""Serving speed: ``nmt translate`` beside the same model exported to CTranslate2
(float32 and int8 weights) on one test set, with the BLEU each gives.

    python benchmarks/ctranslate2_speed.py runs/multi30k-de-en --split test_2016_flickr
    python benchmarks/ctranslate2_speed.py runs/toy --split test --beam 1

Needs the ``ctranslate2`` extra. Every engine uses the same threads, beam and
length limit; CTranslate2's length penalty is its own (score / length**alpha, where
``nmt`` divides by Wu et al.'s ((5 + length) / 6)**alpha), so BLEU may differ slightly
at beam > 1. Each engine runs ``--repeats`` times, interleaved; the best run counts.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path

import ctranslate2
import torch

from nmt.data.pipeline import load_split
from nmt.decoding.metrics import bleu
from nmt.decoding.search import translate_lines
from nmt.export.ctranslate2 import export_ctranslate2
from nmt.model.load import load_model


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="run directory or checkpoint (global dot attention)")
    p.add_argument("--split", default="test_2016_flickr")
    p.add_argument("--data", default=None, help="override data.dir of the recipe")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    loaded = load_model(args.run, torch.device("cpu"))
    data_cfg = loaded.cfg.data
    if args.data:
        data_cfg = dataclasses.replace(data_cfg, dir=args.data)
    src, refs = load_split(data_cfg, args.split)
    cfg = dataclasses.replace(loaded.cfg.decode, beam=args.beam, n_best=1)
    pieces = [loaded.vocabs.src.pieces(line) for line in src]
    longest = max(len(p) for p in pieces) + 1
    limit = int(cfg.max_len_a * longest + cfg.max_len_b)

    def run_nmt() -> list[str]:
        with torch.inference_mode():
            out = translate_lines(
                loaded.model, loaded.vocabs.src, loaded.vocabs.tgt, src, cfg, torch.device("cpu")
            )
        return [h[0].text for h in out]

    def ct2_runner(translator: ctranslate2.Translator, suppress: list[list[str]]):
        def run() -> list[str]:
            out = translator.translate_batch(
                pieces,
                beam_size=args.beam,
                length_penalty=cfg.alpha,
                max_decoding_length=limit,
                max_batch_size=cfg.batch_tokens // args.beam,
                batch_type="tokens",
                suppress_sequences=suppress,
            )
            return loaded.vocabs.tgt.sp.decode([r.hypotheses[0] for r in out])

        return run

    with tempfile.TemporaryDirectory() as tmp:
        exported = export_ctranslate2(Path(args.run), Path(tmp) / "ct2")
        suppress = json.loads((exported / "nmt-export.json").read_text())["suppress_sequences"]
        engines = {"nmt translate (PyTorch, float32)": run_nmt}
        for compute_type in ("float32", "int8"):
            translator = ctranslate2.Translator(
                str(exported), device="cpu", compute_type=compute_type, intra_threads=args.threads
            )
            engines[f"CTranslate2 {ctranslate2.__version__} ({compute_type})"] = ct2_runner(
                translator, suppress
            )
        best = {name: float("inf") for name in engines}
        scores = {}
        for _ in range(args.repeats):
            for name, run in engines.items():
                start = time.perf_counter()
                hyps = run()
                best[name] = min(best[name], time.perf_counter() - start)
                scores[name] = bleu(hyps, refs)
    print(
        f"{args.split}: {len(src)} sentences, beam {args.beam}, {args.threads} threads, "
        f"best of {args.repeats}"
    )
    for name in engines:
        print(
            f"{name:40s} {best[name]:7.2f} s  {len(src) / best[name]:7.1f} sent/s  "
            f"BLEU {scores[name]:.2f}"
        )


if __name__ == "__main__":
    main()
