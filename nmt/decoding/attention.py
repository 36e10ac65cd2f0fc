"""The cross-attention of one translation, as ``nmt attention`` draws it and
:meth:`nmt.api.Translator.attention` returns it: the model reads its own
translation of a sentence (or a given target) and every layer's and head's weights
are kept (nmt.inspection.maps), then drawn as a heatmap or a grid."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nmt.decoding.search import encode_source
from nmt.decoding.split import translate_text
from nmt.errors import NmtError
from nmt.inspection.maps import AttentionMap, attention_maps, grid_figure, heatmap_figure, panels
from nmt.inspection.plotting import figure_format, save_figure
from nmt.model.load import Loaded, load_model
from nmt.progress import warn
from nmt.setup.decoding import with_overrides
from nmt.setup.device import resolve_device


def sentence_attention(
    loaded: Loaded,
    device: torch.device,
    src: str,
    tgt: str | None = None,
    names: tuple[str, str] = ("src", "tgt"),
) -> AttentionMap:
    """Every layer's and head's cross-attention while the model reads ``tgt`` (by
    default its own 1-best translation of ``src`` under the run's decoding); a side
    longer than the model reads is cut, with a warning naming it (by ``names``)."""
    v, limit = loaded.vocabs, loaded.model.cfg.max_positions - 1

    def cut(side: str) -> Callable[[int], None]:
        return lambda n: warn(f"{side}: over {limit:,} pieces; the model reads the first {limit:,}")

    (src_ids,) = encode_source(v.src, [src], limit, cut(names[0]))
    if not src_ids:
        raise NmtError(f"{names[0]}: empty sentence")
    if tgt is None:
        cfg = with_overrides(loaded.cfg.decode, ["decode.n_best=1", "decode.split=none"])
        tgt_ids = translate_text(loaded, loaded.model, [src], cfg, device)[0][0].tokens
    else:
        (tgt_ids,) = encode_source(v.tgt, [tgt], limit, cut(names[1]))
    (amap,) = attention_maps(loaded.model, v.src, v.tgt, [src_ids], [tgt_ids])
    return amap


def attention_figure(
    loaded: Loaded, amap: AttentionMap, layer: int | str = -1, head: int | str = "mean"
) -> Any:
    """A heatmap of ``amap`` (target pieces down, source across, local attention's
    centres as dots): one layer and head, or a grid where either is ``"all"``."""
    layers, heads = panels(amap, str(layer), str(head))
    kind = loaded.cfg.model.attention.kind
    if loaded.cfg.model.decoder.kind == "two_stream":
        kind += " (two-stream decoder: the predicting query stream)"
    title = f"{kind} cross-attention, layer {layer}, head {head}"
    if len(layers) == 1 and len(heads) == 1:
        return heatmap_figure(amap, layers[0], heads[0], title)
    return grid_figure(amap, layers, heads, title)


def draw_attention(
    checkpoint: Path,
    src: str,
    tgt: str | None,
    layer: str,
    head: str,
    output: Path,
    device: str = "auto",
) -> None:
    """``nmt attention``: decode ``src`` (or force ``tgt``) and plot layer ``layer``,
    head ``head`` (either may be 'all': a grid) to ``output`` (PNG, PDF or SVG, by
    its suffix)."""
    figure_format(output)
    where = resolve_device(device)
    loaded = load_model(checkpoint, where)
    amap = sentence_attention(loaded, where, src, tgt, names=("--src", "--tgt"))
    save_figure(attention_figure(loaded, amap, layer, head), output)
