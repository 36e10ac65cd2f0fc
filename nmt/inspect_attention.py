"""``nmt attention``: one sentence's cross-attention heatmap from a checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from nmt.attention_maps import attention_maps, plot_heatmap
from nmt.decoding import encode_source, translate_lines
from nmt.device import resolve_device
from nmt.errors import NmtError
from nmt.model.load import load_model
from nmt.plotting import figure_format
from nmt.progress import warn


def draw_attention(
    checkpoint: Path,
    src: str,
    tgt: str | None,
    layer: str,
    head: str,
    output: Path,
    device: str = "auto",
) -> None:
    """Decode ``src`` (or force ``tgt``) and plot layer ``layer``, head ``head`` (either
    may be 'all': a grid) to ``output`` (PNG, PDF or SVG, by its suffix)."""
    figure_format(output)
    loaded = load_model(checkpoint, resolve_device(device))
    limit = loaded.model.cfg.max_positions - 1

    def warn_cut(option: str) -> Callable[[int], None]:
        return lambda n: warn(
            f"{option}: over {limit:,} pieces; the model reads the first {limit:,}"
        )

    (src_ids,) = encode_source(loaded.vocabs.src, [src], limit, warn_cut("--src"))
    if not src_ids:
        raise NmtError("--src: empty sentence")
    if tgt is None:
        (hyps,) = translate_lines(
            loaded.model,
            loaded.vocabs.src,
            loaded.vocabs.tgt,
            [src],
            loaded.cfg.decode,
            resolve_device(device),
        )
        tgt_ids = hyps[0].tokens
    else:
        (tgt_ids,) = encode_source(loaded.vocabs.tgt, [tgt], limit, warn_cut("--tgt"))
    (amap,) = attention_maps(
        loaded.model, loaded.vocabs.src, loaded.vocabs.tgt, [src_ids], [tgt_ids]
    )
    kind = loaded.cfg.model.attention.kind
    if loaded.cfg.model.decoder.kind == "two_stream":
        kind += " (two-stream decoder: the predicting query stream)"
    title = f"{kind} cross-attention, layer {layer}, head {head}"
    plot_heatmap(output, amap, layer, head, title)
