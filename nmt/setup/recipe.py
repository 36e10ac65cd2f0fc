"""A whole recipe: the sections of every package put together, loaded strictly.

``load_recipe`` reads a YAML file, applies ``--set`` overrides and validates it
into a :class:`RunConfig` (errors name the file and the dotted key);
``config_from_dict`` rebuilds one stored in a checkpoint or a run directory. Either
is first brought from its ``version`` to today's layout
(:func:`nmt.setup.migrations.upgrade_recipe`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nmt.errors import ConfigError, NmtError
from nmt.setup.config import apply_overrides, check, from_dict, read_yaml
from nmt.setup.data import DataConfig
from nmt.setup.decoding import DecodeConfig
from nmt.setup.migrations import RECIPE_VERSION, refuse_moved_keys, upgrade_recipe
from nmt.setup.model import ModelConfig
from nmt.setup.plugins import with_plugins
from nmt.setup.training import TrainConfig


@dataclass(frozen=True)
class RunConfig:
    """A whole recipe."""

    data: DataConfig
    run_dir: str
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=lambda: TrainConfig(max_epochs=10))
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    # modules (or .py files) imported before the rest is read: a user's attention
    # kinds, trainers, blocks (nmt.setup.plugins); stored with the run so that it loads again
    plugins: tuple[str, ...] = ()
    # the recipe layout it is written in (nmt.setup.migrations); none: today's
    version: int = RECIPE_VERSION

    def __post_init__(self) -> None:
        check(
            self.version == RECIPE_VERSION,
            "version",
            f"{self.version!r}: this nmt writes recipes of version {RECIPE_VERSION}",
        )
        positions, max_len = self.model.max_positions, self.data.max_len
        check(
            positions > max_len,
            "model.max_positions",
            f"{positions} is too few for data.max_len {max_len}: a training sentence takes "
            f"up to {max_len} pieces and </s> (or <s>); set at least {max_len + 1}",
        )
        n, kept = self.decode.average_last, self.train.keep_checkpoints
        check(
            n <= kept,
            "decode.average_last",
            f"{n} needs train.keep_checkpoints of at least {n} (it is {kept}): the run "
            "would find too few checkpoints to average only after training",
        )
        check(
            self.train.alignment is None or self.data.join.prob == 0,
            "data.join.prob",
            "joined pairs have no gold alignment of their own: guided alignment "
            "(train.alignment) trains on single pairs only",
        )
        check(
            self.model.decoder.group_layers == 0 or self.data.join.prob > 0,
            "model.decoder.group_layers",
            "sentence groups learn where a sentence ends from joined training examples, "
            "whose sentences a separator divides: set data.join.prob above 0",
        )
        check(
            self.decode.split != "marks" or self.model.decoder.group_layers > 0,
            "decode.split",
            "marks puts a separator between a line's sentences, which only a sentence-group "
            "model reads (model.decoder.group_layers); split sentences cuts them apart",
        )
        if (a := self.train.alignment) is not None:
            n, heads = self.model.decoder_layers, self.model.heads
            check(-n <= a.layer < n, "train.alignment.layer", f"must be in {-n}..{n - 1}")
            check(a.heads <= heads, "train.alignment.heads", f"must be at most {heads}")

    def to_dict(self) -> dict[str, Any]:
        return _plain(dataclasses.asdict(self))

    def to_yaml(self) -> str:
        """The recipe as YAML that loads back to the same RunConfig."""
        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)


def _plain(value: Any) -> Any:
    """Tuples -> lists, so the dict dumps to plain YAML and loads back the same."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def load_recipe(
    path: str | Path, overrides: list[str] | None = None, plugins: tuple[str, ...] = ()
) -> RunConfig:
    """Load a recipe file, apply ``--set`` overrides, import its plug-ins and those
    given (``--plugin``), validate into a RunConfig."""
    data = read_yaml(path)
    if "variants" in data and "run_dir" not in data:
        raise NmtError(f"{path}: a comparison spec, not a recipe; run it with: nmt compare {path}")
    data = apply_overrides(read_recipe(path, data), overrides or [])
    refuse_moved_keys(data, f"{path}")
    try:
        return from_dict(RunConfig, with_plugins(data, plugins))
    except (ConfigError, NmtError) as e:
        raise NmtError(f"{path}: {e}") from None


def read_recipe(path: str | Path, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """A recipe file (or its ``data``, read already) in today's layout: upgraded from
    the ``version`` it names, today's where it names none."""
    return upgrade_recipe(read_yaml(path) if data is None else data, str(path), stored=False)


def config_from_dict(data: dict[str, Any], source: str = "the run") -> RunConfig:
    """Rebuild a RunConfig stored in a checkpoint or a run directory (``source``,
    for messages), importing the plug-ins it was trained with."""
    data = upgrade_recipe(data, source)
    if isinstance(data, dict):
        data = with_plugins(data, why=f" ({source} was trained with it)")
    return from_dict(RunConfig, data)
