"""TensorBoard logging (``train.log_to: [jsonl, tensorboard]``; the ``tensorboard``
extra): every ``metrics.jsonl`` record as scalars (tags: :func:`nmt.training.trackers.tag`),
the recipe as hyperparameters (TensorBoard's HPARAMS tab filters runs by them, e.g.
by ``model.attention.kind``), and at each validation the cross-attention of one
fixed dev sentence as a heatmap with its entropy. ``nmt compare`` points each run
at ``OUT/tb/VARIANT/seedN``, so one ``tensorboard --logdir OUT/tb`` overlays every
variant and seed.
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
from nmt.training.trackers import Tracker, hyperparameters, scalars

if TYPE_CHECKING:
    from nmt.inspection.maps import AttentionMap
    from nmt.setup.recipe import RunConfig

# the metrics TensorBoard's HPARAMS tab shows beside each run's hyperparameters
HPARAM_METRICS = ("valid/bleu", "valid/loss", "train/loss")


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


class TensorBoardLog(Tracker):
    """A ``SummaryWriter`` on ``log_dir``. ``purge_step``: a resumed run's first step;
    events the interrupted run logged from there on are dropped, so curves do not
    double back. ``hparams``: the flat recipe, written once as the run's
    hyperparameters (in the run's own directory, not a sub-run as
    ``SummaryWriter.add_hparams`` makes, so they sit beside its scalars).

    TensorBoard is a view of the run, not the run: when its directory cannot be
    written (a full disk, often outside the run directory), one warning names it,
    logging stops and training goes on (``metrics.jsonl`` still has every figure).
    The writer's background thread would print a traceback for the failed write;
    it stays silent while this log is open, since the warning says it."""

    name = "tensorboard"
    draws_attention = True

    def __init__(
        self, log_dir: Path, purge_step: int | None = None, hparams: dict | None = None
    ) -> None:
        super().__init__()
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
        if hparams:
            self._write(lambda writer: write_hparams(writer, hparams))

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
        step, values = int(record["step"]), scalars(record)

        def write(writer: Any) -> None:
            for name, value in values.items():
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

    def close(self, finished: bool = True) -> None:
        if self.writer is not None:
            self._write(lambda writer: None)
            if self.writer is not None:
                self._drop()
        threading.excepthook = self._hook


def write_hparams(writer: Any, hparams: dict) -> None:
    """The HPARAMS plugin's three summaries (experiment, session start and end) in
    the writer's own directory."""
    from torch.utils.tensorboard.summary import hparams as summaries

    metrics = dict.fromkeys(HPARAM_METRICS, 0.0)  # names only: the values are the scalars
    for summary in summaries(hparams, metrics):
        writer.file_writer.add_summary(summary)


def open_tensorboard(cfg: RunConfig, run_dir: Path, resumed_step: int) -> TensorBoardLog:
    """``train.tensorboard_dir`` (default ``RUN/tb``) with the recipe as hparams; a
    resumed run drops the events it logs again."""
    return TensorBoardLog(
        log_dir(run_dir, cfg.train.tensorboard_dir),
        purge_step=resumed_step + 1 if resumed_step else None,
        hparams=None if resumed_step else hyperparameters(cfg),
    )


def dev_attention(model: Transformer, vocabs: Any, src: str, ref: str) -> AttentionMap:
    """The cross-attention of every layer while ``model`` reads ``ref`` for ``src``."""
    from nmt.inspection.maps import attention_maps

    limit = model.cfg.max_positions - 1
    src_ids = encode_source(vocabs.src, [src], limit)
    tgt_ids = encode_source(vocabs.tgt, [ref], limit)
    return attention_maps(model, vocabs.src, vocabs.tgt, src_ids, tgt_ids)[0]
