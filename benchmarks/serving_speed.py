"""Serving speed: ``nmt translate`` beside the same model exported to ONNX (run by the
export's own loop on onnxruntime) and, for a model it can express, to CTranslate2
(float32 and int8 weights), on one test set, with the BLEU each gives and how many
lines each engine's output shares with ``nmt translate``'s.

    python benchmarks/serving_speed.py runs/multi30k-de-en --split test_2016_flickr
    python benchmarks/serving_speed.py runs/toy --split test --beam 1

Needs the ``onnx`` extra, and the ``ctranslate2`` extra for its rows. Every engine
uses the same threads, beam and per-sentence length limit (CTranslate2 takes one limit
per call: one call per distinct limit). The ONNX loop is nmt's search and
should share every line; CTranslate2's length penalty is its own (score /
length**alpha, where ``nmt`` divides by Wu et al.'s ((5 + length) / 6)**alpha), so
its lines may differ at beam > 1. Each engine runs ``--repeats`` times,
interleaved; the best run counts. Exporting is not timed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import runpy
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from nmt.data.pipeline import load_split
from nmt.decoding.metrics import bleu
from nmt.decoding.search import translate_lines
from nmt.export.ctranslate2 import export_ctranslate2, inexpressible
from nmt.export.onnx import export_onnx
from nmt.model.load import Loaded, load_model


def ctranslate2_engines(
    run: Path, out: Path, loaded: Loaded, src: list[str], beam: int, threads: int
) -> dict[str, Callable[[], list[str]]]:
    """CTranslate2 float32 and int8 on ``src``, or none where the extra is missing or
    the model is not CTranslate2's architecture (the reason is printed)."""
    try:
        import ctranslate2
    except ImportError:
        print("CTranslate2: not installed (the ctranslate2 extra)")
        return {}
    if (why := inexpressible(loaded)) is not None:
        print(f"CTranslate2: not run ({why})")
        return {}
    exported = export_ctranslate2(run, out)
    suppress = json.loads((exported / "nmt-export.json").read_text())["suppress_sequences"]
    cfg = loaded.cfg.decode
    pieces = [loaded.vocabs.src.pieces(line) for line in src]
    cap = loaded.cfg.model.max_positions - 1
    # nmt's limit per sentence, as CTranslate2 counts it (no </s>): one call per limit
    limits = [min(int(cfg.max_len_a * (len(p) + 1) + cfg.max_len_b), cap) - 1 for p in pieces]
    groups: dict[int, list[int]] = {}
    for i, limit in enumerate(limits):
        groups.setdefault(limit, []).append(i)
    engines = {}
    for compute_type in ("float32", "int8"):
        translator = ctranslate2.Translator(
            str(exported), device="cpu", compute_type=compute_type, intra_threads=threads
        )

        def run_ct2(translator: ctranslate2.Translator = translator) -> list[str]:
            best: list[list[str]] = [[] for _ in pieces]
            for limit, rows in groups.items():
                out = translator.translate_batch(
                    [pieces[i] for i in rows],
                    beam_size=beam,
                    length_penalty=cfg.alpha,
                    max_decoding_length=limit,
                    max_batch_size=cfg.batch_tokens // beam,
                    batch_type="tokens",
                    suppress_sequences=suppress,
                )
                for i, result in zip(rows, out):
                    best[i] = result.hypotheses[0]
            return loaded.vocabs.tgt.sp.decode(best)

        engines[f"CTranslate2 {ctranslate2.__version__} ({compute_type})"] = run_ct2
    return engines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path, help="run directory or checkpoint")
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

    def run_nmt() -> list[str]:
        with torch.inference_mode():
            out = translate_lines(
                loaded.model, loaded.vocabs.src, loaded.vocabs.tgt, src, cfg, torch.device("cpu")
            )
        return [h[0].text for h in out]

    with tempfile.TemporaryDirectory() as tmp:
        onnx_dir = export_onnx(args.run, Path(tmp) / "onnx")
        loop = runpy.run_path(str(onnx_dir / "translate.py"))  # as a user runs it
        translator = loop["Translator"](onnx_dir, threads=args.threads)
        engines = {
            "nmt translate (PyTorch, float32)": run_nmt,
            "ONNX Runtime (export's loop, float32)": lambda: translator.translate(
                src, beam=args.beam
            ),
        }
        engines |= ctranslate2_engines(
            args.run, Path(tmp) / "ct2", loaded, src, args.beam, args.threads
        )
        best = {name: float("inf") for name in engines}
        outputs = {}
        for _ in range(args.repeats):
            for name, run in engines.items():
                start = time.perf_counter()
                outputs[name] = run()
                best[name] = min(best[name], time.perf_counter() - start)
    print(
        f"{args.split}: {len(src)} sentences, {loaded.cfg.model.attention.kind} attention, "
        f"beam {args.beam}, {args.threads} threads, best of {args.repeats}"
    )
    ours = outputs["nmt translate (PyTorch, float32)"]
    for name, hyps in outputs.items():
        same = sum(a == b for a, b in zip(hyps, ours))
        print(
            f"{name:40s} {best[name]:7.2f} s  {len(src) / best[name]:7.1f} sent/s  "
            f"BLEU {bleu(hyps, refs):.2f}  same as nmt translate {same}/{len(src)}"
        )


if __name__ == "__main__":
    main()
