"""The comparison's figures: BLEU by source length, dev curves, attention side by side.

Each says what it shows and how far to trust it: the spread over seeds is drawn as
a band around the mean, buckets of too few sentences to read are greyed, and the
attention panels share one colour scale, named with its bar."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from nmt.compare.analysis import RunAnalysis
from nmt.compare.rows import Row
from nmt.inspection.maps import AttentionMap, draw_heatmap, panel_size, select
from nmt.inspection.plotting import pyplot, save_figure

FEW = 30  # sentences under which a length bucket's BLEU is too noisy to read: greyed
LINES = ("-", "--", ":", "-.")  # after the 10 colours, the next 10 variants change line
MARKERS = ("o", "s", "^", "D")


def style(i: int) -> dict[str, str]:
    """The i-th variant's colour, line and marker: distinct for 40 variants (a study
    of 18 drew pairs of variants in one colour)."""
    turn = (i // 10) % len(LINES)
    return {"color": f"C{i % 10}", "linestyle": LINES[turn], "marker": MARKERS[turn]}


def legend(fig: Any, ax: Any) -> None:
    """The variants' legend beside the panels, where it covers no line or label."""
    fig.legend(*ax.get_legend_handles_labels(), loc="outside right upper", fontsize=8)


def plot_length_buckets(path: Path, split: str, rows: list[Row]) -> None:
    """BLEU and the length ratio per source-length bucket, one line per variant (mean
    over seeds, BLEU with the seeds' range as a band): where a variant falls behind,
    and whether it stopped early there. Buckets of fewer than :data:`FEW` sentences
    are greyed."""
    save_figure(length_figure(split, rows), path)


def length_figure(split: str, rows: list[Row]) -> Any:
    """:func:`plot_length_buckets`' figure. Each bucket's label gives its sentence
    count as ``n=…`` in a small font: eight buckets' labels with four-digit counts
    fit side by side in a panel (spelt out at the axes' size, they overlapped)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), layout="constrained")
    labels = list(rows[0].length_buckets)
    counts = [rows[0].length_buckets[k]["sentences"] for k in labels]
    x = np.arange(len(labels))
    for ax, key, name in zip(axes, ("bleu", "length_ratio"), ("BLEU", "length ratio (hyp / ref)")):
        for i, row in enumerate(rows):
            buckets = row.length_buckets
            values = [buckets[k].get(key, math.nan) for k in labels]
            ax.plot(x, values, **style(i), label=row.variant)
            if key == "bleu" and row.seeds > 1:
                low = [buckets[k].get("bleu_min", math.nan) for k in labels]
                high = [buckets[k].get("bleu_max", math.nan) for k in labels]
                ax.fill_between(x, low, high, color=style(i)["color"], alpha=0.15, linewidth=0)
        for j, n in enumerate(counts):
            if n < FEW:
                ax.axvspan(j - 0.5, j + 0.5, color="grey", alpha=0.15, linewidth=0)
        ax.set_xticks(x, [f"{k}\nn={n}" for k, n in zip(labels, counts)], fontsize=8)
        ax.set(xlabel="source length (words; n: its sentences)", ylabel=name)
        ax.grid(alpha=0.3)
    axes[1].axhline(1.0, color="grey", linewidth=0.8)
    legend(fig, axes[0])
    seeds = max(r.seeds for r in rows)
    band = f"bands: the range over {seeds} seeds; " if seeds > 1 else ""
    fig.suptitle(
        f"{split}: by source length (mean over seeds; {band}grey: buckets of under {FEW} "
        "sentences, too few to read)",
        fontsize=10,
    )
    return fig


def plot_dev_curves(path: Path, runs: dict[str, list[RunAnalysis]]) -> None:
    """Dev BLEU (or dev loss, where BLEU was not validated) against steps and against
    training minutes: one line per variant, the mean over its seeds at each
    validation they share, with the seeds' range as a band."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True, layout="constrained")
    key = "valid_bleu"
    if not any(key in p for rs in runs.values() for r in rs for p in r.curve):
        key = "valid_loss"
    seeds = 1
    for i, (name, per_seed) in enumerate(runs.items()):
        curves = [{p["step"]: p for p in r.curve if key in p} for r in per_seed]
        steps = sorted(set.intersection(*(set(c) for c in curves))) if curves else []
        if not steps:
            continue
        seeds = max(seeds, len(curves))
        values = np.array([[c[s][key] for s in steps] for c in curves])  # (seeds, steps)
        minutes = np.array([[c[s]["elapsed"] / 60 for s in steps] for c in curves]).mean(0)
        for ax, x in zip(axes, (np.array(steps), minutes)):
            ax.plot(x, values.mean(0), **style(i), markersize=4, label=name)
            if len(curves) > 1:
                low, high = values.min(0), values.max(0)
                ax.fill_between(x, low, high, color=style(i)["color"], alpha=0.15, linewidth=0)
    ylabel = "dev BLEU (greedy)" if key == "valid_bleu" else "dev loss"
    band = f"; bands: the range over {seeds} seeds" if seeds > 1 else ""
    fig.suptitle(f"the mean over seeds{band}", fontsize=10)
    axes[0].set(xlabel="training step", ylabel=ylabel)
    axes[1].set(xlabel="training time (minutes)")
    for ax in axes:
        ax.grid(alpha=0.3)
    legend(fig, axes[0])
    save_figure(fig, path)


def plot_attention_grid(
    path: Path,
    maps: dict[str, AttentionMap],
    title: str,
    captions: dict[str, list[int]] | None = None,
) -> None:
    """One sentence's cross-attention (last layer, mean over heads) while each variant
    reads the reference, a panel per variant on one colour scale (its bar and range
    said), with the source pieces where each caption starts (``captions``, per
    variant) on a joined split."""
    plt = pyplot()
    n = len(maps)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    w, h = panel_size(next(iter(maps.values())), rows, cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(w * cols + 1, h * rows), squeeze=False, layout="constrained"
    )
    vmax = max(float(select(amap, -1, "mean")[0].max()) for amap in maps.values())
    for ax, (name, amap) in zip(axes.flat, maps.items()):
        image = draw_heatmap(ax, amap, -1, "mean", name, vmax)
        for start in (captions or {}).get(name, []):
            ax.axvline(start - 0.5, color="orange", linewidth=1)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.colorbar(image, ax=list(axes.flat), fraction=0.02, label="attention weight")
    boundary = "; orange: where a caption starts" if captions else ""
    fig.suptitle(
        f"{title}\ntarget: the reference (forced); last layer, mean over heads; one colour "
        f"scale, 0 to {vmax:.2f}{boundary}",
        fontsize=10,
    )
    save_figure(fig, path)
