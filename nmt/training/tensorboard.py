"""TensorBoard logging (``train.log_to: [jsonl, tensorboard]``; the ``tensorboard``
extra): every ``metrics.jsonl`` record as scalars, and at each validation the
cross-attention of one fixed dev sentence as a heatmap with its entropy.

Tags group by prefix: ``valid_bleu`` -> ``valid/bleu``, ``attn_reward`` (REINFORCE)
-> ``attention/reward``, ``ss_gold_prob`` (scheduled sampling's ε) ->
``scheduled_sampling/gold_prob``, anything else -> ``train/...``. ``nmt compare``
points each run at ``OUT/tb/VARIANT/seedN``, so one ``tensorboard --logdir OUT/tb``
overlays every variant and seed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nmt.attention_maps import AttentionMap, attention_entropy, attention_maps, heatmap_figure
from nmt.decoding import encode_source
from nmt.errors import NmtError
from nmt.model import Transformer

GROUPS = {"valid_": "valid", "attn_": "attention", "ss_": "scheduled_sampling"}
NOT_SCALARS = ("step",)


def tag(key: str) -> str:
    for prefix, group in GROUPS.items():
        if key.startswith(prefix):
            return f"{group}/{key.removeprefix(prefix)}"
    return f"train/{key}"


def summary_writer() -> type:
    """PyTorch's ``SummaryWriter``, or a one-line error naming the extra to install
    (checked before a run starts, so that nothing is written in vain)."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise NmtError(
            "train.log_to: tensorboard needs the tensorboard extra: pip install 'nmt[tensorboard]'"
        ) from None
    return SummaryWriter


def log_dir(run_dir: Path, chosen: str | None) -> Path:
    """Where a run's events go: ``train.tensorboard_dir``, else ``RUN/tb``; one that
    is a file is an error before the run starts."""
    path = Path(chosen) if chosen else run_dir / "tb"
    if path.exists() and not path.is_dir():
        raise NmtError(f"train.tensorboard_dir: {path}: a file, not a directory")
    return path


class TensorBoardLog:
    """A ``SummaryWriter`` on ``log_dir``. ``purge_step``: a resumed run's first step;
    events the interrupted run logged from there on are dropped, so curves do not
    double back."""

    def __init__(self, log_dir: Path, purge_step: int | None = None) -> None:
        SummaryWriter = summary_writer()
        try:
            self.writer = SummaryWriter(str(log_dir), purge_step=purge_step)
        except OSError as e:
            raise NmtError(
                f"{log_dir}: cannot write TensorBoard logs ({e.strerror or e})"
            ) from None

    def record(self, record: dict[str, Any]) -> None:
        """One ``metrics.jsonl`` record: each number as a scalar at ``record["step"]``."""
        step = int(record["step"])
        for key, value in record.items():
            if key not in NOT_SCALARS and isinstance(value, (int, float)):
                self.writer.add_scalar(tag(key), value, step)

    def attention(self, amap: AttentionMap, step: int) -> None:
        """The fixed dev sentence's cross-attention as a heatmap (last layer, mean over
        heads, as ``compare`` draws it), and its mean entropy (nats) over layers, heads
        and target positions."""
        entropy = attention_entropy(amap.weights)  # weights (L,H,T,S)
        self.writer.add_scalar("attention/dev_entropy", entropy, step)
        title = f"last layer, mean over heads, step {step}"
        fig = heatmap_figure(amap, -1, "mean", title)
        self.writer.add_figure("attention/dev_sentence", fig, step)  # closes the figure

    def close(self) -> None:
        self.writer.close()


def dev_attention(model: Transformer, vocabs: Any, src: str, ref: str) -> AttentionMap:
    """The cross-attention of every layer while ``model`` reads ``ref`` for ``src``."""
    limit = model.cfg.max_positions - 1
    src_ids = encode_source(vocabs.src, [src], limit)
    tgt_ids = encode_source(vocabs.tgt, [ref], limit)
    return attention_maps(model, vocabs.src, vocabs.tgt, src_ids, tgt_ids)[0]
