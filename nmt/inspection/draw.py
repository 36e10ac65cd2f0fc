"""``nmt attention``: one sentence's cross-attention heatmap from a checkpoint."""

from __future__ import annotations

from pathlib import Path

from nmt.api import Translator
from nmt.inspection.plotting import figure_format, save_figure


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
    may be 'all': a grid) to ``output`` (PNG, PDF or SVG, by its suffix): what
    :meth:`nmt.api.Translator.attention` and :meth:`~nmt.api.Translator.figure` give."""
    figure_format(output)
    translator = Translator.load(checkpoint, device)
    amap = translator.attention(src, tgt, names=("--src", "--tgt"))
    save_figure(translator.figure(amap, layer, head), output)
