"""nmt from Python, for notebooks and scripts: train a recipe, evaluate a run, run a
study, load a run, translate sentences, look at a sentence's cross-attention, score
a translation (docs/api.md).

    from nmt.api import Translator, compare, evaluate, score, train
    summary = train("recipes/toy.yaml", ["train.max_steps=200"])  # as nmt train
    t = Translator.load("runs/toy")
    t.translate(["lo nute miguge"])                    # ['...']
    amap = t.attention("lo nute miguge")               # arrays: amap.weights (L,H,T,S)
    fig = t.figure(amap, layer="all", head="mean")     # a matplotlib figure
    score(t.translate(src), refs)                      # {'bleu': ..., 'chrf': ...}

The commands call the same functions: ``nmt translate`` translates through
:func:`nmt.decoding.split.translate_text`, as :meth:`Translator.nbest` does, and ``nmt
attention`` draws what :meth:`Translator.attention` returns.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from nmt.decoding.attention import attention_figure, sentence_attention
from nmt.decoding.evaluate import read_results
from nmt.decoding.metrics import Score, corpus_score
from nmt.decoding.search import Options, Translation
from nmt.decoding.split import translate_text
from nmt.errors import NmtError
from nmt.inspection.maps import AttentionMap
from nmt.model.load import Loaded, load_model
from nmt.setup.decoding import Sampling, with_values
from nmt.setup.device import resolve_device


def strings(value: Iterable[str], name: str) -> list[str]:
    """``value``, strings, as a list: one string, which would be read as its
    characters (a sentence translated letter by letter), or an item that is not a
    string, is refused naming ``name``."""
    if isinstance(value, str):
        raise TypeError(f"{name}: a list of strings, not one string (write [{value[:40]!r}])")
    listed = list(value)
    for i, item in enumerate(listed):
        if not isinstance(item, str):
            raise TypeError(f"{name}: item {i} is {type(item).__name__}, not a string")
    return listed


def a_string(value: str, name: str) -> str:
    """``value`` where one string is expected (one sentence; a list is refused)."""
    if not isinstance(value, str):
        raise TypeError(f"{name}: one string, not {type(value).__name__}")
    return value


def a_path(value: str | Path, name: str) -> Path:
    """``value`` as a Path; anything else (a spec given as a dict) is refused naming
    ``name``."""
    if not isinstance(value, str | os.PathLike):
        raise TypeError(f"{name}: a path to a file or directory, not {type(value).__name__}")
    return Path(value)


@dataclasses.dataclass
class Translator:
    """A trained model and its vocabularies, ready to translate (``nmt translate``'s
    search settings: the run's ``decode`` section, changed per call)."""

    loaded: Loaded
    device: torch.device

    @classmethod
    def load(cls, path: str | Path, device: str = "auto") -> Translator:
        """A run directory (its best.pt) or a checkpoint file."""
        where = resolve_device(a_string(device, "device"))
        return cls(load_model(a_path(path, "path"), where), where)

    def nbest(
        self,
        sentences: Iterable[str],
        *,
        beam: int | None = None,
        n_best: int = 1,
        sample: Sampling | None = None,
        refs: list[str] | None = None,
        **decode: Any,
    ) -> list[list[Translation]]:
        """Each sentence's ``n_best`` translations (text, score, target ids), best
        first: by beam search (``beam``; the run's by default), or one drawn per
        sentence with ``sample`` (a :class:`~nmt.setup.decoding.Sampling`). Any other
        key of the recipe's ``decode`` section may be given (``coverage=0.2``,
        ``min_len_a=0.8``); ``refs``: each output exactly as long as its reference
        (``--length oracle``)."""
        lines = strings(sentences, "sentences")
        if sample is not None and not isinstance(sample, Sampling):
            raise TypeError(f"sample: a Sampling (its options), not {type(sample).__name__}")
        cfg = with_values(self.loaded.cfg.decode, decode)
        if sample is not None:
            beam = 1
        elif beam is None:
            beam = max(cfg.beam, n_best)
        cfg = with_values(cfg, {"beam": beam, "n_best": n_best})
        model = self.loaded.model
        options = Options(sampling=sample, refs=refs)
        return translate_text(self.loaded, model, lines, cfg, self.device, options)

    def translate(self, sentences: Iterable[str], **options: Any) -> list[str]:
        """Each sentence's best translation; ``options`` as :meth:`nbest` takes them."""
        return [hyps[0].text for hyps in self.nbest(sentences, **options)]

    def attention(
        self, src: str, tgt: str | None = None, names: tuple[str, str] = ("src", "tgt")
    ) -> AttentionMap:
        """The cross-attention of every layer and head while the model reads ``tgt``
        (by default its own translation of ``src``): pieces and weights as arrays
        (:class:`~nmt.inspection.maps.AttentionMap`). A sentence longer than the model
        reads is cut, with a warning naming it (by ``names``)."""
        src, tgt = a_string(src, "src"), None if tgt is None else a_string(tgt, "tgt")
        return sentence_attention(self.loaded, self.device, src, tgt, names)

    def figure(self, amap: AttentionMap, layer: int | str = -1, head: int | str = "mean") -> Any:
        """A heatmap of ``amap`` (target pieces down, source across, local attention's
        centres as dots): one layer and head, or a grid where either is ``"all"``."""
        if not isinstance(amap, AttentionMap):
            raise TypeError(f"amap: what attention() returns, not {type(amap).__name__}")
        return attention_figure(self.loaded, amap, layer, head)


def score(
    hyps: list[str], refs: list[str] | list[list[str]], metrics: Iterable[str] = ("bleu", "chrf")
) -> dict[str, Score]:
    """sacreBLEU's corpus scores (``nmt score``'s: bleu, chrf, chrf++, ter) of ``hyps``
    against one reference per line, or several lists of them."""
    hyps = strings(hyps, "hyps")
    listed = refs if isinstance(refs, str) else list(refs)  # one string is refused below
    several = bool(listed) and not isinstance(listed[0], str)  # lists of references
    streams = [strings(r, "refs") for r in listed] if several else [strings(listed, "refs")]
    for stream in streams:
        if len(stream) != len(hyps):
            raise NmtError(f"{len(hyps):,} hypotheses but {len(stream):,} references")
    return {m: corpus_score(m, hyps, streams) for m in dict.fromkeys(strings(metrics, "metrics"))}


def train(
    recipe: str | Path,
    overrides: Sequence[str] = (),
    *,
    device: str = "auto",
    resume: bool = False,
    plugins: Sequence[str] = (),
) -> dict[str, Any]:
    """``nmt train``: train a recipe (``overrides`` as ``--set KEY=VALUE``), then
    evaluate its ``data.test`` splits; returns the run's summary (summary.json: steps,
    time, rate, what stopped it, ...), the test scores under ``"results"``
    (results.json). The recipe is checked before anything is imported or trained."""
    from nmt.decoding.evaluate import evaluate as evaluate_splits
    from nmt.setup.recipe import load_recipe
    from nmt.training.run import train as run_training
    from nmt.training.tracking import publish_results

    cfg = load_recipe(
        a_path(recipe, "recipe"),
        strings(overrides, "overrides"),
        tuple(strings(plugins, "plugins")),
    )
    summary = run_training(cfg, device=device, resume=resume)
    if summary is None:  # a data-parallel rank other than 0
        return {}
    if cfg.data.test:
        evaluate_splits(cfg.run_dir, list(cfg.data.test), device=device)
    publish_results(cfg.run_dir)
    return {**summary, "results": read_results(Path(cfg.run_dir))}


def evaluate(
    run: str | Path,
    splits: Sequence[str] = (),
    *,
    overrides: Sequence[str] = (),
    length: str = "model",
    device: str = "auto",
    data: str | Path | None = None,
) -> dict[str, dict[str, Any]]:
    """``nmt evaluate``: translate and score ``splits`` (default the recipe's
    ``data.test``; ``NAME*K``, ``NAME~K`` and ``NAME>N`` too) with the run's decoding
    or another (``overrides``: ``decode.KEY=VALUE``, kept as ``SPLIT@TAG``), from the
    recipe's corpus or ``data`` (another directory; ``SPLIT@data=NAME``); returns the
    run's results.json, every evaluation so far by name."""
    from nmt.decoding.evaluate import evaluate as evaluate_splits
    from nmt.setup.decoding import length_mode
    from nmt.training.tracking import publish_results

    run = a_path(run, "run")
    splits, overrides = strings(splits, "splits"), strings(overrides, "overrides")
    evaluate_splits(run, splits or None, device=device, overrides=overrides,
                    length=length_mode(length), data_dir=data)  # fmt: skip
    publish_results(run)
    return read_results(run)


def compare(
    spec: str | Path,
    overrides: Sequence[str] = (),
    *,
    device: str = "auto",
    jobs: int = 1,
    plugins: Sequence[str] = (),
) -> dict[str, Any]:
    """``nmt compare SPEC``: train or reuse every variant × seed of a study and report;
    returns its results.json (rows with means, spreads, p-values and verdicts,
    contrasts, ensembles, every run's figures). report.md, report.html and the
    plots are written in its out_dir as the command writes them."""
    from nmt.compare import run_study
    from nmt.io.files import read_json

    if isinstance(jobs, bool) or not isinstance(jobs, int):
        raise TypeError(f"jobs: a number of runs at once, not {type(jobs).__name__}")
    if jobs < 1:
        raise NmtError(f"jobs: {jobs}, expected a number of runs at once (1 or more)")

    out = run_study(a_path(spec, "spec"), device=device, overrides=strings(overrides, "overrides"),
                    jobs=jobs, plugins=tuple(strings(plugins, "plugins")))  # fmt: skip
    return read_json(Path(out) / "results.json")


def export(
    checkpoint: str | Path,
    out: str | Path,
    format: str = "hf",
    *,
    quantization: str = "float32",
    license: str = "unknown",
) -> Path:
    """``nmt export``: the model of a run (its best.pt) or checkpoint as a directory
    for Hugging Face transformers (``hf``, with its tokenizer and model card),
    CTranslate2 (``ctranslate2``) or ONNX Runtime (``onnx``, with its decoding loop);
    returns the directory."""
    from nmt.export import export_model

    where = a_path(checkpoint, "checkpoint")
    return export_model(where, a_path(out, "out"), format, quantization, license)
