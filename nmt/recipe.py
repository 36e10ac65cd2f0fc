"""A whole recipe: the sections of every package put together, loaded strictly.

``load_recipe`` reads a YAML file, applies ``--set`` overrides and validates it
into a :class:`RunConfig` (errors name the file and the dotted key);
``config_from_dict`` rebuilds one stored in a checkpoint or a run directory.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nmt.config import apply_overrides, from_dict, read_yaml
from nmt.data.config import DataConfig
from nmt.decoding import DecodeConfig
from nmt.errors import ConfigError, NmtError
from nmt.model.config import ModelConfig
from nmt.training.config import TrainConfig
from nmt.training.run import TRAINERS


@dataclass(frozen=True)
class RunConfig:
    """A whole recipe."""

    data: DataConfig
    run_dir: str
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=lambda: TrainConfig(max_epochs=10))
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def __post_init__(self) -> None:
        if self.train.trainer not in TRAINERS:
            raise ConfigError("train.trainer", TRAINERS.unknown(self.train.trainer))

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


def load_recipe(path: str | Path, overrides: list[str] | None = None) -> RunConfig:
    """Load a recipe file, apply ``--set`` overrides, validate into a RunConfig."""
    data = apply_overrides(read_yaml(path), overrides or [])
    try:
        return from_dict(RunConfig, data)
    except ConfigError as e:
        raise NmtError(f"{path}: {e}") from None


def config_from_dict(data: dict[str, Any]) -> RunConfig:
    """Rebuild a RunConfig stored in a checkpoint or a run directory."""
    return from_dict(RunConfig, data)
