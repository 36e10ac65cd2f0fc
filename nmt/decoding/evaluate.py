"""Test-time evaluation: the best checkpoint translates test splits; scores to results.json."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import torch

from nmt.data.corpus import n_lines
from nmt.data.pipeline import load_split
from nmt.decoding.metrics import corpus_score
from nmt.decoding.search import Options
from nmt.decoding.split import sentence_rules, translate_text
from nmt.decoding.translate import one_line
from nmt.errors import NmtError
from nmt.export.averaging import average_last
from nmt.io.files import held, is_number, read_json, write_text
from nmt.model.load import Loaded, load_model, model_from_payload
from nmt.progress import console, sentence_progress, warn
from nmt.setup.data import DataConfig
from nmt.setup.decoding import LengthMode, decode_tag, evaluation_name, with_overrides
from nmt.setup.device import resolve_device

# What each split's entry in results.json holds: these numbers, and both signatures.
NUMBERS = ("sentences", "sentences_per_s", "bleu", "chrf")


def read_results(run_dir: Path) -> dict[str, Any]:
    """``RUN/results.json``: the scores of each split evaluated, {} before any
    evaluation. It is derived, so damage is mended by evaluating again: a damaged
    file counts as empty, and a split counts as not evaluated when its entry is
    damaged or its ``{split}.hyp`` is missing or not as long as the entry says."""
    path = Path(run_dir) / "results.json"
    results = _stored(path)
    kept = {}
    for split, entry in results.items():
        if (problem := _damage(Path(run_dir), split, entry)) is None:
            kept[split] = entry
        else:
            warn(f"{path}: {split!r} {problem}; it is evaluated again")
    return kept


def _stored(path: Path) -> dict[str, Any]:
    try:
        results = read_json(path)
    except NmtError:
        warn(f"{path} was damaged; rebuilding it")
        return {}
    return results if isinstance(results, dict) else {}


def _damage(run_dir: Path, split: str, entry: Any) -> str | None:
    """What is wrong with a split's entry and its hypotheses, or None."""
    if not isinstance(entry, dict) or not (
        all(is_number(entry.get(k)) for k in NUMBERS)
        and all(isinstance(entry.get(f"{m}_signature"), str) for m in ("bleu", "chrf"))
    ):
        return "has a damaged entry"
    hyp = run_dir / f"{split}.hyp"
    try:
        with open(hyp, "rb") as f:
            lines = sum(1 for _ in f)
    except OSError:
        return f"has no {hyp.name}"
    if lines != entry["sentences"]:
        return f"has {n_lines(lines)} in {hyp.name}, not {entry['sentences']:,}"
    return None


def evaluated_model(run_dir: Path, device: torch.device) -> Loaded:
    """The model a run's test scores come from: ``best.pt``, or the mean of the last
    ``decode.average_last`` kept checkpoints."""
    if not run_dir.is_dir():
        what = "no such directory" if not run_dir.exists() else "a file, not a run directory"
        raise NmtError(f"{run_dir}: {what} (evaluate takes the run_dir that nmt train wrote)")
    loaded = load_model(run_dir, device)
    if n := loaded.cfg.decode.average_last:
        loaded = model_from_payload(average_last(run_dir, n), run_dir, device)
    return loaded


def evaluate(
    run_dir: str | Path,
    splits: list[str] | None = None,
    device: str = "auto",
    overrides: list[str] | None = None,
    length: LengthMode = "model",
    data_dir: str | Path | None = None,
) -> None:
    """Translate each split with the recipe's decode settings (best.pt, or the mean of
    the last ``decode.average_last`` kept checkpoints); write ``{split}.hyp`` and
    merge BLEU/chrF (with sacreBLEU signatures) into ``RUN/results.json``.

    ``overrides`` (``decode.KEY=VALUE``) and ``length`` (``oracle``: every output
    exactly as long as its reference, in pieces) make another evaluation of the same
    checkpoint, kept beside the recipe's own under ``SPLIT@TAG`` (the .hyp file and
    the results.json entry), TAG saying what differs; so does ``data_dir``, another
    corpus directory in the run's languages to read the splits from (an
    out-of-domain test set: ``@data=NAME``, its directory's name)."""
    run_dir = Path(run_dir)
    dev = resolve_device(device)
    loaded = evaluated_model(run_dir, dev)
    cfg = loaded.cfg
    decode = with_overrides(cfg.decode, overrides or [])
    data, elsewhere = other_corpus(cfg.data, data_dir)
    tag = decode_tag(overrides or [], length, elsewhere)
    if decode.split != "none":  # refused before the first split is translated
        sentence_rules(loaded, decode, oracle=length == "oracle")
    for split in dict.fromkeys(splits or cfg.data.test):  # a split named twice: once
        src, refs = load_split(data, split)
        name = evaluation_name(split, tag)
        start = time.perf_counter()
        with sentence_progress(name, len(src), show=True) as progress:
            oracle = refs if length == "oracle" else None
            options = Options(progress=progress, refs=oracle)
            nbest = translate_text(loaded, loaded.model, src, decode, dev, options)
        seconds = time.perf_counter() - start
        hyps = [one_line(h[0].text) for h in nbest]
        write_text(run_dir / f"{name}.hyp", "".join(h + "\n" for h in hyps))
        entry: dict[str, Any] = {
            "sentences": len(src),
            "beam": decode.beam,
            "decode_seconds": seconds,
            "sentences_per_s": len(src) / max(seconds, 1e-9),
        }
        for metric in ("bleu", "chrf"):
            s = corpus_score(metric, hyps, [refs])
            entry[metric] = s.score
            entry[f"{metric}_signature"] = s.signature
        record(run_dir, name, entry)
        console.print(
            f"{name}: BLEU {entry['bleu']:.2f}  chrF {entry['chrf']:.2f}  "
            f"(beam {decode.beam}, {entry['sentences_per_s']:.1f} sent/s)"
        )


def other_corpus(data: DataConfig, data_dir: str | Path | None) -> tuple[DataConfig, str | None]:
    """The data section to read splits from, and the name that tags them when it is
    another corpus than the recipe's (``--data DIR``). A relative ``data.dir`` names
    the corpus from where the run was trained: read from elsewhere, the error says so."""
    if data_dir is None and not Path(data.dir).is_dir():
        fix = "name the corpus with --data DIR"
        if not Path(data.dir).is_absolute():
            here = Path.cwd()
            fix = f"relative to where the run was trained, not {here}: run from there, or {fix}"
        raise NmtError(f"data.dir: {data.dir}: no such directory (the run's recipe; {fix})")
    if data_dir is None or Path(data_dir).resolve() == Path(data.dir).resolve():
        return data, None
    if not Path(data_dir).is_dir():
        raise NmtError(f"--data {data_dir}: no such directory")
    return dataclasses.replace(data, dir=str(data_dir)), Path(data_dir).resolve().name


def record(run_dir: Path, split: str, entry: dict[str, Any]) -> None:
    """Merge one split's scores into ``RUN/results.json``, read and written under a
    lock, so that evaluations at once (two splits, or compare's beside a user's)
    keep each other's scores."""
    with held(run_dir / "results.json.lock"):
        results = _stored(run_dir / "results.json")
        results[split] = entry
        write_text(run_dir / "results.json", json.dumps(results, indent=2) + "\n")
