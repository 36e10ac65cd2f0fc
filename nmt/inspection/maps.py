"""Seeing cross-attention: weights from a forced decoding pass, heatmaps, .npz files."""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nmt.data.alignment import Alignment, ascii_digits, attention_alignment
from nmt.data.batching import pad
from nmt.data.vocab import BOS, EOS, Vocab
from nmt.errors import NmtError
from nmt.inspection.plotting import pyplot, save_figure
from nmt.io.files import atomic_write
from nmt.model.seq2seq import Transformer
from nmt.progress import counted


@dataclass(frozen=True)
class AttentionMap:
    src: list[str]  # source pieces, then </s>
    tgt: list[str]  # target pieces, then </s>
    weights: np.ndarray  # (layers, H, T, S) cross-attention weights
    centers: np.ndarray | None  # (layers, Hc, T) predicted p_t (local_p), else None


@torch.no_grad()
def attention_maps(
    model: Transformer,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    src_ids: list[list[int]],
    tgt_ids: list[list[int]],
) -> list[AttentionMap]:
    """Cross-attention of every layer when the model reads ``tgt_ids`` (teacher-forced)."""
    model.eval()
    device = next(model.parameters()).device
    src = pad(src_ids, suffix=[EOS]).to(device)  # (B,S)
    tgt_in = pad(tgt_ids, prefix=[BOS]).to(device)  # (B,T)
    memory, src_mask = model.encode(src)
    state = model.decoder_state(memory, src_mask, src=src)
    _, records = model.decode_states(tgt_in, state, need_weights=True)
    attended = [calls[0] for calls in records]  # per layer, the stream that predicts
    weights = torch.stack([a.weights for a in attended], 1).float()  # (B,L,H,T,S)
    found = [a.centers for a in attended]  # local attention's p_t
    centers = torch.stack(found, 1) if found[0] is not None else None  # (B,L,Hc,T)
    out = []
    for b, (s, t) in enumerate(zip(src_ids, tgt_ids)):
        S, T = len(s) + 1, len(t) + 1
        out.append(
            AttentionMap(
                [src_vocab.id_to_piece(i) for i in s] + ["</s>"],
                [tgt_vocab.id_to_piece(i) for i in t] + ["</s>"],
                weights[b, :, :, :T, :S].cpu().numpy(),
                centers[b, :, :, :T].float().cpu().numpy() if centers is not None else None,
            )
        )
    return out


def each_attention_map(
    model: Transformer,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    src_ids: list[list[int]],
    tgt_ids: list[list[int]],
    indices: Iterable[int],
    batch: int = 32,
) -> Iterator[tuple[int, AttentionMap]]:
    """(i, map of sentence i) for each of ``indices``, computed ``batch`` sentences at a
    time, shortest first: in that order, not ``indices``'. Sentences of like length
    share a batch, so that less of it is padding (docs/benchmarks.md)."""
    todo = sorted(indices, key=lambda i: (len(src_ids[i]), len(tgt_ids[i])))
    for start in range(0, len(todo), batch):
        chunk = todo[start : start + batch]
        maps = attention_maps(
            model,
            src_vocab,
            tgt_vocab,
            [src_ids[i] for i in chunk],
            [tgt_ids[i] for i in chunk],
        )
        yield from zip(chunk, maps)


def word_alignment(amap: AttentionMap, guided: tuple[int, int] | None = None) -> Alignment:
    """The argmax word alignment of the attention averaged over layers and heads —
    or, for a model trained with guided alignment, ``guided`` = (layer, heads),
    over that layer's first ``heads`` heads, the ones supervised (as Garg et al.
    2019 read alignments from their supervised head) — without </s>: what
    ``compare`` scores as AER and ``translate --alignments`` writes. Empty when
    either side has no word."""
    if len(amap.src) < 2 or len(amap.tgt) < 2:
        return set()
    if guided is None:
        mean = amap.weights.mean((0, 1))  # (T,S)
    else:
        layer, heads = guided
        mean = amap.weights[layer, :heads].mean(0)
    return attention_alignment(mean[:-1, :-1], amap.src[:-1], amap.tgt[:-1])


def supervised_heads(cfg: Any) -> tuple[int, int] | None:
    """A run recipe's guided-alignment (layer, heads), or None."""
    guide = cfg.train.alignment
    return None if guide is None else (guide.layer, guide.heads)


def save_npz(path: Path, amap: AttentionMap) -> None:
    """One sentence's maps as .npz: src, tgt (pieces), weights, and centers if any."""
    arrays = {"src": np.array(amap.src), "tgt": np.array(amap.tgt), "weights": amap.weights}
    if amap.centers is not None:
        arrays["centers"] = amap.centers
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic_write(path, lambda f: f.write(buf.getvalue()))


def select(amap: AttentionMap, layer: int, head: str) -> tuple[np.ndarray, np.ndarray | None]:
    """The (T,S) map of one layer and one head (or the mean over heads), and its centres."""
    layers, heads = amap.weights.shape[:2]
    if not -layers <= layer < layers:
        has = counted(layers, "decoder layer")
        raise NmtError(f"layer {layer}: the model has {has} (0..{layers - 1}; -1: the last)")
    w = amap.weights[layer]  # (H,T,S)
    c = amap.centers[layer] if amap.centers is not None else None  # (Hc,T)
    if head == "mean":
        return w.mean(0), (c.mean(0) if c is not None else None)
    if not ascii_digits(head) or int(head) >= heads:
        raise NmtError(f"head {head}: expected 'mean', 'all' or a head index below {heads}")
    h = int(head)
    return w[h], (c[min(h, c.shape[0] - 1)] if c is not None else None)


MAX_INCHES = 40.0  # a figure's longest side: memory grows with its area, and no one reads more
LABEL_INCHES = 0.12  # the room one 8-point tick label needs


def panel_size(amap: AttentionMap, rows: int = 1, cols: int = 1) -> tuple[float, float]:
    """Inches (width, height) of one heatmap panel in a grid of ``rows`` x ``cols``: a
    cell of about a label's size per piece, the whole figure at most MAX_INCHES a
    side (a canvas that grew with the sentence took memory with its area)."""
    T, S = amap.weights.shape[-2:]
    width = min(max(3.5, 0.28 * S + 1.5), MAX_INCHES / cols)
    height = min(max(3.0, 0.25 * T + 1.5), MAX_INCHES / rows)
    return width, height


def ticks(pieces: list[str], inches: float) -> tuple[list[int], list[str]]:
    """Tick positions and labels along an axis of ``inches``: every piece where the
    labels fit, else every k-th one with its index ("12 ▁word")."""
    stride = max(1, math.ceil(len(pieces) * LABEL_INCHES / max(inches, LABEL_INCHES)))
    if stride == 1:
        return list(range(len(pieces))), pieces
    kept = list(range(0, len(pieces), stride))
    return kept, [f"{i} {pieces[i]}" for i in kept]


def draw_heatmap(
    ax: Any, amap: AttentionMap, layer: int, head: str, title: str, vmax: float | None = None
) -> Any:
    """Target pieces down, source pieces across; local attention's centres p_t as dots;
    colours from 0 to ``vmax`` (None: this map's largest weight). Returns the image,
    for a colour bar."""
    w, c = select(amap, layer, head)  # (T,S), (T,) or None
    im = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=vmax, aspect="auto")
    box = ax.get_position()  # in figure fractions
    ax.set_xticks(*ticks(amap.src, box.width * ax.figure.get_figwidth()), rotation=90, fontsize=8)
    ax.set_yticks(*ticks(amap.tgt, box.height * ax.figure.get_figheight()), fontsize=8)
    ax.set_xlabel("source")
    ax.set_ylabel("target")
    if c is not None:
        ax.plot(c, range(len(c)), "o", color="red", markersize=3, label="centre $p_t$")
        ax.legend(loc="lower right", fontsize=7)
    ax.set_title(title, fontsize=9)
    return im


def heatmap_figure(amap: AttentionMap, layer: int, head: str, title: str) -> Any:
    """One sentence's heatmap (see :func:`draw_heatmap`) with a colour bar, in a
    figure sized to the sentence."""
    fig, ax = pyplot().subplots(figsize=panel_size(amap))
    im = draw_heatmap(ax, amap, layer, head, title)
    fig.colorbar(im, ax=ax, fraction=0.04)
    return fig


def panels(amap: AttentionMap, layer: str, head: str) -> tuple[list[int], list[str]]:
    """The layers and heads that ``--layer`` (an index, negative from the last, or
    'all') and ``--head`` (an index, 'mean' or 'all') name."""
    layers, heads = amap.weights.shape[:2]
    if layer == "all":
        chosen = list(range(layers))
    else:
        try:
            chosen = [int(layer)]
        except ValueError:
            raise NmtError(f"layer {layer}: expected a layer index or 'all'") from None
    for i in chosen:
        select(amap, i, "mean" if head == "all" else head)  # an error names a bad one
    return chosen, ([str(h) for h in range(heads)] if head == "all" else [head])


def grid_figure(amap: AttentionMap, layers: list[int], heads: list[str], title: str) -> Any:
    """A panel per layer (rows) and head (columns), on one colour scale so that a
    sharp head and a diffuse one look different."""
    vmax = max(float(select(amap, i, h)[0].max()) for i in layers for h in heads)
    w, h = panel_size(amap, len(layers), len(heads))
    fig, axes = pyplot().subplots(
        len(layers), len(heads), figsize=(w * len(heads), h * len(layers)), squeeze=False
    )
    for row, i in zip(axes, layers):
        for ax, head in zip(row, heads):
            draw_heatmap(ax, amap, i, head, f"layer {i}, head {head}", vmax)
    fig.suptitle(f"{title}; colour 0 (dark) to {vmax:.2f} (bright)")
    return fig


def plot_heatmap(path: Path, amap: AttentionMap, layer: str, head: str, title: str) -> None:
    """One sentence's heatmap, or a grid of them when ``layer`` or ``head`` is 'all'
    (see :func:`panels`), in the format ``path``'s suffix names."""
    layers, heads = panels(amap, layer, head)
    if len(layers) == 1 and len(heads) == 1:
        fig = heatmap_figure(amap, layers[0], heads[0], title)
    else:
        fig = grid_figure(amap, layers, heads, title)
    save_figure(fig, path)


def attention_entropy(weights: np.ndarray) -> float:
    """Mean entropy (nats) of attention distributions (..., S) over the last axis."""
    return float(-(weights * np.log(np.clip(weights, 1e-12, None))).sum(-1).mean())
