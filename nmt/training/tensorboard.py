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

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nmt import install_hint
from nmt.decoding.search import encode_source
from nmt.errors import NmtError
from nmt.model.seq2seq import Transformer
from nmt.progress import warn

if TYPE_CHECKING:
    from nmt.inspection.maps import AttentionMap

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
            f"train.log_to: tensorboard needs the tensorboard extra: {install_hint('tensorboard')}"
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
    double back.

    TensorBoard is a view of the run, not the run: when its directory cannot be
    written (a full disk, often outside the run directory), one warning names it,
    logging stops and training goes on (``metrics.jsonl`` still has every figure).
    The writer's background thread would print a traceback for the failed write;
    it stays silent while this log is open, since the warning says it."""

    def __init__(self, log_dir: Path, purge_step: int | None = None) -> None:
        SummaryWriter = summary_writer()
        self.log_dir = log_dir
        try:
            self.writer = SummaryWriter(str(log_dir), purge_step=purge_step)
        except OSError as e:
            raise NmtError(
                f"{log_dir}: cannot write TensorBoard logs ({e.strerror or e})"
            ) from None
        self._hook = threading.excepthook
        threading.excepthook = self._quiet_writer_thread

    def _quiet_writer_thread(self, args: Any) -> None:
        if not (args.thread is not None and type(args.thread).__name__ == "_AsyncWriterThread"):
            self._hook(args)

    def _write(self, write: Callable[[Any], None]) -> None:
        if self.writer is None:
            return
        try:
            write(self.writer)
            self.writer.flush()  # surface a failed write now, not at close
        except OSError as e:
            warn(
                f"{self.log_dir}: cannot write TensorBoard logs ({e.strerror or e}); "
                "TensorBoard logging stops, training goes on (metrics.jsonl has every figure)"
            )
            self._drop()

    def _drop(self) -> None:
        writer, self.writer = self.writer, None
        with contextlib.suppress(OSError):
            writer.close()

    def record(self, record: dict[str, Any]) -> None:
        """One ``metrics.jsonl`` record: each number as a scalar at ``record["step"]``."""
        step = int(record["step"])
        scalars = {
            tag(k): v
            for k, v in record.items()
            if k not in NOT_SCALARS and isinstance(v, (int, float))
        }

        def write(writer: Any) -> None:
            for name, value in scalars.items():
                writer.add_scalar(name, value, step)

        self._write(write)

    def attention(self, amap: AttentionMap, step: int) -> None:
        """The fixed dev sentence's cross-attention as a heatmap (last layer, mean over
        heads, as ``compare`` draws it), and its mean entropy (nats) over layers, heads
        and target positions (drawing is imported here: a run that logs no
        TensorBoard loads no plotting)."""
        from nmt.inspection.maps import attention_entropy, heatmap_figure
        from nmt.inspection.plotting import pyplot

        entropy = attention_entropy(amap.weights)  # weights (L,H,T,S)
        title = f"last layer, mean over heads, step {step}"
        fig = heatmap_figure(amap, -1, "mean", title)

        def write(writer: Any) -> None:
            writer.add_scalar("attention/dev_entropy", entropy, step)
            writer.add_figure("attention/dev_sentence", fig, step)  # closes the figure

        self._write(write)
        pyplot().close(fig)  # add_figure closes it, unless logging has stopped

    def close(self) -> None:
        if self.writer is not None:
            self._write(lambda writer: None)
            if self.writer is not None:
                self._drop()
        threading.excepthook = self._hook


def dev_attention(model: Transformer, vocabs: Any, src: str, ref: str) -> AttentionMap:
    """The cross-attention of every layer while ``model`` reads ``ref`` for ``src``."""
    from nmt.inspection.maps import attention_maps

    limit = model.cfg.max_positions - 1
    src_ids = encode_source(vocabs.src, [src], limit)
    tgt_ids = encode_source(vocabs.tgt, [ref], limit)
    return attention_maps(model, vocabs.src, vocabs.tgt, src_ids, tgt_ids)[0]
