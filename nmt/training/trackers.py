"""Where a run's figures go besides ``metrics.jsonl`` (``train.log_to``): TensorBoard,
MLflow and Weights & Biases, each an optional extra.

Every tracker gets the recipe as hyperparameters (flattened to dotted keys such as
``model.attention.kind``, so that runs can be filtered by attention kind) and every
``metrics.jsonl`` record under the tags of :func:`tag`. A tracker is a view of the
run, not the run: when it fails (a full disk, a locked database), one warning names
it, that tracker stops and training goes on; ``metrics.jsonl`` keeps every figure.
A resumed run logs to the same MLflow run and W&B run (their ids are kept in
``RUN/trackers.json``). Once a run is evaluated (``nmt train``'s test splits, ``nmt
evaluate``, a study's runs), MLflow and W&B get its scores and files as well
(:func:`nmt.training.tracking.publish_results`): every split's scores of
``results.json`` as ``test/SPLIT/METRIC``, and the recipe, the vocabularies, the
scores and, unless ``train.log_checkpoint`` is false, ``best.pt``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nmt import install_hint
from nmt.errors import NmtError
from nmt.io.files import held, read_json, write_text
from nmt.progress import warn

if TYPE_CHECKING:
    from nmt.inspection.maps import AttentionMap
    from nmt.setup.recipe import RunConfig

GROUPS = {"valid_": "valid", "attn_": "attention", "ss_": "scheduled_sampling"}
NOT_SCALARS = ("step",)
IDS = "trackers.json"  # RUN/trackers.json: {"mlflow": run id, "wandb": run id}


def tag(key: str) -> str:
    """A metric's name in a tracker: ``valid_bleu`` -> ``valid/bleu``, ``attn_reward``
    (REINFORCE) -> ``attention/reward``, ``ss_gold_prob`` (scheduled sampling's ε) ->
    ``scheduled_sampling/gold_prob``, anything else -> ``train/...``."""
    for prefix, group in GROUPS.items():
        if key.startswith(prefix):
            return f"{group}/{key.removeprefix(prefix)}"
    return f"train/{key}"


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """The numbers of one ``metrics.jsonl`` record, under their trackers' tags."""
    return {
        tag(k): float(v)
        for k, v in record.items()
        if k not in NOT_SCALARS and isinstance(v, (int, float)) and not isinstance(v, bool)
    }


def hyperparameters(cfg: RunConfig) -> dict[str, str | int | float | bool]:
    """The recipe as flat ``section.key`` values a tracker can filter on (lists and
    nulls as their text)."""
    flat: dict[str, str | int | float | bool] = {}

    def walk(value: Any, key: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{key}.{k}" if key else str(k))
        elif isinstance(value, (str, int, float, bool)):
            flat[key] = value
        else:
            flat[key] = str(value)

    walk(dataclasses.asdict(cfg), "")
    return flat


class Tracker:
    """One destination of a run's figures; :meth:`_guard` turns its failures into
    one warning that stops it."""

    name = "tracker"
    draws_attention = False  # whether :meth:`attention` draws anything (it costs a pass)
    # environment variables set (unless the user set them) while the library runs
    patience: dict[str, str] = {}

    def __init__(self) -> None:
        self.failed: str | None = None  # why it stopped, for the run's summary

    def _guard(self, write: Callable[[], None]) -> None:
        if self.failed is not None:
            return
        try:
            with defaults(self.patience):
                write()
        except Exception as e:  # any failure of another library's logging: the run goes on
            reason = " ".join(str(e).split())[:200] or type(e).__name__
            self.failed = reason
            warn(
                f"train.log_to: {self.name} failed ({reason}); its logging stops, training "
                "goes on (metrics.jsonl has every figure)"
            )

    def record(self, record: dict[str, Any]) -> None:
        """One ``metrics.jsonl`` record, logged at ``record["step"]``."""

    def attention(self, amap: AttentionMap, step: int) -> None:
        """The fixed dev sentence's cross-attention at a validation."""

    def results(self, scores: dict[str, float], files: list[Path]) -> None:
        """After an evaluation: the run's scores (:func:`result_metrics`) and its files."""

    def close(self, finished: bool) -> None:
        """``finished``: the run ended normally (else it was stopped or failed)."""


# what a metric name may hold in MLflow (its validation); anything else becomes "_"
NAME = re.compile(r"[^0-9A-Za-z_\-. /]")


def result_metrics(results: dict[str, Any]) -> dict[str, float]:
    """results.json's figures as metrics, ``test/SPLIT/METRIC`` (``test/test*3/bleu``
    is ``test/test_3/bleu``: MLflow's names take no ``*``, ``~``, ``@`` or ``=``; the
    exact names are in results.json, which the trackers keep too)."""
    return {
        f"test/{NAME.sub('_', split)}/{key}": float(value)
        for split, entry in results.items()
        if isinstance(entry, dict)
        for key, value in entry.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    }


def import_extra(module: str, extra: str) -> Any:
    """An optional extra's module, or a one-line error naming the install."""
    try:
        return __import__(module)
    except ImportError:
        raise NmtError(
            f"train.log_to: {module} needs the {extra} extra: {install_hint(extra)}"
        ) from None


def saved_id(run_dir: Path, name: str) -> str | None:
    """The id a tracker gave this run before (a resumed run continues it)."""
    path = run_dir / IDS
    ids = read_json(path) if path.is_file() else {}
    value = ids.get(name) if isinstance(ids, dict) else None
    return value if isinstance(value, str) else None


def save_id(run_dir: Path, name: str, value: str) -> None:
    path = run_dir / IDS
    ids = read_json(path) if path.is_file() else {}
    ids = ids if isinstance(ids, dict) else {}
    write_text(path, json.dumps({**ids, name: value}, indent=2) + "\n")


@contextmanager
def defaults(values: dict[str, str]) -> Iterator[None]:
    """Environment variables set for the block where the user has not set them, and
    removed again after it."""
    added = [key for key in values if key not in os.environ]
    os.environ.update({key: values[key] for key in added})
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def sqlite_file(uri: str) -> Path | None:
    """The database file of a ``sqlite:///PATH`` tracking URI, else None."""
    if not uri.startswith("sqlite:///"):
        return None
    path = Path(uri.removeprefix("sqlite:///"))
    return path if path.parent.is_dir() else None


def run_name(cfg: RunConfig) -> str:
    return cfg.train.run_name or str(cfg.run_dir)


class MlflowLog(Tracker):
    """An MLflow run in ``train.mlflow_uri`` (default: the SQLite store
    ``RUN/mlflow.db``; ``nmt compare`` points a study's runs at ``OUT/mlflow.db``),
    in the experiment ``train.experiment``: the recipe as params, the attention
    kind as a tag, every record as metrics. ``mlflow ui --backend-store-uri
    sqlite:///RUN/mlflow.db`` shows it."""

    name = "mlflow"
    # an unreachable server: a few seconds before the warning, not MLflow's 7 retries
    # with minutes of backoff (a user's own settings win)
    patience = {
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
        "MLFLOW_HTTP_REQUEST_TIMEOUT": "15",
    }

    def __init__(self, cfg: RunConfig, run_dir: Path, resumed_step: int = 0) -> None:
        super().__init__()
        import_extra("mlflow", "mlflow")
        # its table creation logs at INFO, a failed write 20 lines at ERROR: the one
        # warning of _guard says it
        for noisy in ("mlflow", "alembic", "sqlalchemy"):
            logging.getLogger(noisy).setLevel(logging.CRITICAL)
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        uri = cfg.train.mlflow_uri or f"sqlite:///{(run_dir / 'mlflow.db').resolve()}"
        self.client: Any = None
        self.run_id = ""

        def start() -> None:
            # one process at a time creates a SQLite store's tables and its experiment
            # (a study's workers start together: the second died on "duplicate column")
            with held(Path(f"{store}.lock")) if (store := sqlite_file(uri)) else nullcontext():
                begin()

        def begin() -> None:
            self.client = MlflowClient(tracking_uri=uri)
            name = cfg.train.experiment
            found = self.client.get_experiment_by_name(name)
            experiment = (
                found.experiment_id
                if found
                else self.client.create_experiment(name, artifact_location=artifact_root(uri))
            )
            self.run_id = saved_id(run_dir, "mlflow") or ""
            if self.run_id:
                self.client.update_run(self.run_id, status="RUNNING")
                return
            tags = {"attention": cfg.model.attention.kind, "run_dir": str(cfg.run_dir)}
            tags |= cfg.train.tags
            run = self.client.create_run(experiment, run_name=run_name(cfg), tags=tags)
            self.run_id = run.info.run_id
            params = [Param(k, str(v)[:6000]) for k, v in hyperparameters(cfg).items()]
            for i in range(0, len(params), 100):  # MLflow takes at most 100 params a batch
                self.client.log_batch(self.run_id, params=params[i : i + 100])
            save_id(run_dir, "mlflow", self.run_id)

        self._guard(start)

    def record(self, record: dict[str, Any]) -> None:
        from mlflow.entities import Metric

        now, step = int(time.time() * 1000), int(record["step"])
        metrics = [Metric(k, v, now, step) for k, v in scalars(record).items()]
        self._guard(lambda: self.client.log_batch(self.run_id, metrics=metrics))

    def results(self, scores: dict[str, float], files: list[Path]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, 0) for k, v in scores.items()]
        self._guard(lambda: self.client.log_batch(self.run_id, metrics=metrics))
        for path in files:
            self._guard(lambda path=path: self.client.log_artifact(self.run_id, str(path)))

    def close(self, finished: bool) -> None:
        status = "FINISHED" if finished else "KILLED"
        self._guard(lambda: self.client.set_terminated(self.run_id, status))


def artifact_root(uri: str) -> str | None:
    """Where a new experiment keeps its runs' files: beside a SQLite store
    (``mlflow-artifacts/``; MLflow's own default is ``./mlruns`` in whatever directory
    the process runs in), else where the server says (None)."""
    store = sqlite_file(uri)
    return None if store is None else (store.parent / "mlflow-artifacts").resolve().as_uri()


class WandbLog(Tracker):
    """A Weights & Biases run in offline mode under ``train.wandb_dir`` (default the
    run directory): nothing leaves the machine until ``wandb sync DIR/wandb/offline-run-*``.
    Project ``train.experiment``, the recipe as its config."""

    name = "wandb"

    def __init__(self, cfg: RunConfig, run_dir: Path, resumed_step: int = 0) -> None:
        super().__init__()
        self.wandb = wandb = import_extra("wandb", "wandb")
        where = Path(cfg.train.wandb_dir) if cfg.train.wandb_dir else run_dir
        self.run: Any = None
        self.started_service = "WANDB_SERVICE" not in os.environ
        run_id = saved_id(run_dir, "wandb") or secrets.token_hex(4)

        def start() -> None:
            where.mkdir(parents=True, exist_ok=True)
            settings = wandb.Settings(silent=True, console="off", x_disable_stats=True)
            self.run = wandb.init(
                mode="offline",
                dir=str(where),
                project=cfg.train.experiment,
                name=run_name(cfg),
                id=run_id,
                resume="allow",
                config=hyperparameters(cfg),
                tags=[cfg.model.attention.kind, *(f"{k}={v}" for k, v in cfg.train.tags.items())],
                settings=settings,
                reinit="create_new",
            )
            save_id(run_dir, "wandb", run_id)

        self._guard(start)

    def record(self, record: dict[str, Any]) -> None:
        if self.run is not None:
            self._guard(lambda: self.run.log(scalars(record), step=int(record["step"])))

    def results(self, scores: dict[str, float], files: list[Path]) -> None:
        def log() -> None:
            self.run.summary.update(scores)
            artifact = self.wandb.Artifact(f"run-{self.run.id}", type="run")
            for path in files:
                artifact.add_file(str(path))
            self.run.log_artifact(artifact)

        if self.run is not None:
            self._guard(log)

    def close(self, finished: bool) -> None:
        def finish() -> None:
            self.run.finish(exit_code=0 if finished else 1)
            if self.started_service:  # W&B's background process, unless it was running
                self.wandb.teardown()

        if self.run is not None:
            self._guard(finish)
