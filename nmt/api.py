"""nmt from Python, for notebooks and scripts: load a run, translate sentences, look
at a sentence's cross-attention, score a translation (docs/api.md).

    from nmt.api import Translator, score
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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from nmt.decoding.attention import attention_figure, sentence_attention
from nmt.decoding.metrics import Score, corpus_score
from nmt.decoding.search import Options, Translation
from nmt.decoding.split import translate_text
from nmt.errors import NmtError
from nmt.inspection.maps import AttentionMap
from nmt.model.load import Loaded, load_model
from nmt.setup.decoding import Sampling, with_overrides
from nmt.setup.device import resolve_device


@dataclasses.dataclass
class Translator:
    """A trained model and its vocabularies, ready to translate (``nmt translate``'s
    search settings: the run's ``decode`` section, changed per call)."""

    loaded: Loaded
    device: torch.device

    @classmethod
    def load(cls, path: str | Path, device: str = "auto") -> Translator:
        """A run directory (its best.pt) or a checkpoint file."""
        where = resolve_device(device)
        return cls(load_model(path, where), where)

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
        lines = list(sentences)
        changes = [f"decode.{k}={v}" for k, v in decode.items()]
        cfg = with_overrides(self.loaded.cfg.decode, changes)
        beam = 1 if sample is not None else beam or max(cfg.beam, n_best)
        cfg = with_overrides(cfg, [f"decode.beam={beam}", f"decode.n_best={n_best}"])
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
        return sentence_attention(self.loaded, self.device, src, tgt, names)

    def figure(self, amap: AttentionMap, layer: int | str = -1, head: int | str = "mean") -> Any:
        """A heatmap of ``amap`` (target pieces down, source across, local attention's
        centres as dots): one layer and head, or a grid where either is ``"all"``."""
        return attention_figure(self.loaded, amap, layer, head)


def score(
    hyps: list[str], refs: list[str] | list[list[str]], metrics: Iterable[str] = ("bleu", "chrf")
) -> dict[str, Score]:
    """sacreBLEU's corpus scores (``nmt score``'s: bleu, chrf, chrf++, ter) of ``hyps``
    against one reference per line, or several lists of them."""
    streams = refs if refs and isinstance(refs[0], list) else [refs]
    for stream in streams:
        if len(stream) != len(hyps):
            raise NmtError(f"{len(hyps):,} hypotheses but {len(stream):,} references")
    return {m: corpus_score(m, hyps, streams) for m in dict.fromkeys(metrics)}
