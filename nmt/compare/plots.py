"""The comparison's figures: BLEU by source length, dev curves, attention side by side."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from nmt.attention_maps import AttentionMap, draw_heatmap, panel_size
from nmt.compare.analysis import RunAnalysis
from nmt.plotting import pyplot, save_figure


def plot_length_buckets(path: Path, split: str, rows: list[dict[str, Any]]) -> None:
    """BLEU and the length ratio per source-length bucket, one line per variant (mean
    over seeds): where a variant falls behind, and whether it stopped early there."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    labels = list(rows[0]["length_buckets"])
    counts = [rows[0]["length_buckets"][k]["sentences"] for k in labels]
    for ax, key, name in zip(axes, ("bleu", "length_ratio"), ("BLEU", "length ratio (hyp / ref)")):
        for row in rows:
            buckets = row["length_buckets"]
            values = [buckets[k].get(key, math.nan) for k in labels]
            ax.plot(labels, values, "o-", label=row["variant"])
        ax.set_xticks(range(len(labels)), [f"{k}\n({n} sent.)" for k, n in zip(labels, counts)])
        ax.set(xlabel="source length (words)", ylabel=name)
        ax.grid(alpha=0.3)
    axes[1].axhline(1.0, color="grey", linewidth=0.8)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{split}: by source length")
    save_figure(fig, path)


def plot_dev_curves(path: Path, runs: dict[str, list[RunAnalysis]]) -> None:
    """Dev BLEU (or dev loss, where BLEU was not validated) against steps and against
    training minutes; seeds of one variant share a colour."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    key = "valid_bleu"
    if not any(key in p for rs in runs.values() for r in rs for p in r.curve):
        key = "valid_loss"
    for i, (name, per_seed) in enumerate(runs.items()):
        color = f"C{i % 10}"
        for j, r in enumerate(per_seed):
            points = [p for p in r.curve if key in p]
            label = name if j == 0 else None
            axes[0].plot(
                [p["step"] for p in points],
                [p[key] for p in points],
                color=color,
                marker=".",
                label=label,
            )
            axes[1].plot(
                [p["elapsed"] / 60 for p in points],
                [p[key] for p in points],
                color=color,
                marker=".",
            )
    ylabel = "dev BLEU (greedy)" if key == "valid_bleu" else "dev loss"
    axes[0].set(xlabel="training step", ylabel=ylabel)
    axes[1].set(xlabel="training time (minutes)")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    save_figure(fig, path)


def plot_attention_grid(path: Path, maps: dict[str, AttentionMap], title: str) -> None:
    """One sentence's cross-attention (last layer, mean over heads), a panel per variant."""
    plt = pyplot()
    n = len(maps)
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    w, h = panel_size(next(iter(maps.values())), rows, cols)
    fig, axes = plt.subplots(rows, cols, figsize=(w * cols, h * rows), squeeze=False)
    for ax, (name, amap) in zip(axes.flat, maps.items()):
        draw_heatmap(ax, amap, -1, "mean", name)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.suptitle(title)
    save_figure(fig, path)
