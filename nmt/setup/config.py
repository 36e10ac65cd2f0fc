"""The strict loader of recipes: YAML -> dict -> ``--set`` overrides -> frozen dataclasses.

Each package keeps its own sections (``nmt.setup.data``, ``nmt.setup.model``,
``nmt.setup.training``, the attention variants' configs with the variants);
``nmt.setup.recipe`` puts them together. Every section is a frozen dataclass.
``from_dict`` is strict: an unknown key, a wrong type or an impossible value
raises :class:`ConfigError` naming the dotted key (with a close-match suggestion
for misspelt keys). Cross-field checks live in each class's ``__post_init__``.
A section whose other values make a key useless says so in ``inert_keys()`` (a
dotted key names one of a sub-section); giving such a key a value other than its
default is an error, so that no
setting is silently ignored. A section whose options depend on a registry
entry (the attention variant) names the registry in its field's metadata
(:func:`by_kind`).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from dataclasses import fields
from pathlib import Path
from typing import Any, Literal

import yaml

from nmt.errors import ConfigError, NmtError, shown
from nmt.setup.registry import Registry


def check(ok: bool, key: str, message: str) -> None:
    """Raise ``ConfigError(key, message)`` unless ``ok``; for ``__post_init__``."""
    if not ok:
        raise ConfigError(key, message)


# a target/source length ratio (local_m's centre, cross-ALiBi's diagonal): outside
# this, every position maps to one end of the other sentence and the scores overflow
RATIO_BOUNDS = "must be in 0.01..100 (a target/source length ratio; null: measured)"

SEED_MAX = 2**31 - 1  # every generator seeded from a seed accepts 0..SEED_MAX (see check_seed)


def check_seed(seed: int, key: str) -> None:
    """Seeds are kept in 0..2**31 − 1, a range every consumer accepts: torch and numpy
    generators, and the seeds derived from them (the batch order's seed·100,003 +
    epoch, a rank's seed·1,000 + rank) stay below 2**63."""
    check(0 <= seed <= SEED_MAX, key, f"must be in 0..{SEED_MAX:,}")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def from_dict(cls: type, data: Any, path: str = "") -> Any:
    """Build dataclass ``cls`` from ``data``, strictly; errors name ``path.key``."""
    if not isinstance(data, dict):
        raise ConfigError(path, f"expected a mapping, got {_type_name(data)}")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in fields(cls) if f.init}
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            hint = f" (did you mean {_join(path, close[0])!r}?)" if close else ""
            raise ConfigError(_join(path, str(key)), f"unknown key{hint}")
    for name, f in known.items():
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and name not in data:
            raise ConfigError(_join(path, name), "required key is missing")
    kwargs = {}
    for k, v in data.items():
        if "registry" not in known[k].metadata:
            kwargs[k] = _convert(hints[k], v, _join(path, k))
        elif typing.get_origin(hints[k]) is tuple:  # a list of entries, each by its kind
            if not isinstance(v, (list, tuple)):
                raise ConfigError(_join(path, k), f"expected a list, got {_type_name(v)}")
            entries = enumerate(v)
            at = _join(path, k)
            registry = known[k].metadata["registry"]
            kwargs[k] = tuple(_from_registry(*registry, e, f"{at}[{i}]") for i, e in entries)
        else:
            kwargs[k] = _from_registry(*known[k].metadata["registry"], v, _join(path, k))
    try:
        built = cls(**kwargs)
    except ConfigError as e:
        raise e.under(path) from None
    inert = getattr(built, "inert_keys", dict)()
    for key, why in inert.items():
        if _given(built, data, key):
            raise ConfigError(_join(path, key), f"has no effect: {why}; remove it")
    return built


def _given(built: Any, data: dict[str, Any], key: str) -> bool:
    """Whether the recipe gave ``key`` (dotted: a key of a sub-section) a value
    other than its default."""
    head, _, rest = key.partition(".")
    if head not in data:
        return False
    if rest:
        sub = data[head]
        return isinstance(sub, dict) and _given(getattr(built, head), sub, rest)
    field = next(f for f in fields(built) if f.name == head)
    return getattr(built, head) != _default(field)


def by_kind(registry: Registry, default: str, key: str = "kind") -> dict[str, Any]:
    """Field metadata: the section is read into the config that ``registry`` holds for
    the entry its ``key`` names (``default`` when it names none)."""
    return {"registry": (registry, default, key)}


def _from_registry(registry: Registry, default: str, key: str, data: Any, path: str) -> Any:
    """``data`` into the config of entry ``data[key]`` (else ``default``); an option
    of another entry, given to this one, is named as such."""
    if isinstance(data, str):
        raise ConfigError(path, f"expected a mapping; write {shown(data)} as its {key!r} key")
    if not isinstance(data, dict):
        raise ConfigError(path, f"expected a mapping, got {_type_name(data)}")
    kind = data.get(key, default)
    if not isinstance(kind, str) or not registry.known(kind):  # installed plug-ins load here
        raise ConfigError(_join(path, key), registry.unknown(kind))
    options = {n: {f.name for f in fields(registry.config(n))} for n in registry.names()}
    for name in data:
        owners = [n for n, names in options.items() if name in names]
        if name not in options[kind] and owners:
            raise ConfigError(
                _join(path, str(name)),
                f"an option of {key} {' and '.join(owners)}, not of {key} {kind!r}",
            )
    return from_dict(registry.config(kind), {key: kind, **data}, path)


def _default(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def _convert(tp: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _convert(inner, value, path)
    if origin is Literal:
        allowed = typing.get_args(tp)
        # YAML 1.1 reads an unquoted off / on as false / true
        if isinstance(value, bool) and {False: "off", True: "on"}[value] in allowed:
            value = {False: "off", True: "on"}[value]
        if value not in allowed:
            raise ConfigError(
                path, f"must be one of {', '.join(map(str, allowed))}, got {shown(value)}"
            )
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(path, f"expected a list, got {_type_name(value)}")
        (inner, _ellipsis) = typing.get_args(tp)
        return tuple(_convert(inner, v, f"{path}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(path, f"expected a mapping, got {_type_name(value)}")
        (_key, inner) = typing.get_args(tp)
        return {str(k): _convert(inner, v, _join(path, str(k))) for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, path)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(path, f"expected true or false, got {shown(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(path, f"expected an integer, got {shown(value)}")
        return value
    if tp is float:
        # YAML 1.1 reads 7e-4 (no dot) as a string; accept it as the number it is.
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise ConfigError(path, f"expected a number, got {shown(value)}") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(path, f"expected a number, got {shown(value)}")
        if not math.isfinite(value):
            raise ConfigError(path, f"expected a finite number, got {shown(value)}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(path, f"expected a string, got {shown(value)}")
        return value
    raise TypeError(f"unsupported recipe type {tp!r} at {path}")  # a bug, not user input


# ------------------------------------------------------------------- loading


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"model.attention.window=5"`` -> (["model", "attention", "window"], 5)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise NmtError(f"--set {text!r}: expected KEY.PATH=VALUE")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as e:
        if raw.lstrip().startswith(("{", "[")):  # meant as a YAML mapping or list
            problem = getattr(e, "problem", None) or "cannot parse"
            raise NmtError(f"--set {text!r}: not valid YAML ({problem})") from None
        value = raw  # a plain string that YAML cannot read, e.g. a path starting with @
    return key.strip().split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of ``data`` with each ``KEY.PATH=VALUE`` override set."""
    import copy

    data = copy.deepcopy(data)
    for text in overrides:
        keys, value = parse_override(text)
        node = data
        for i, key in enumerate(keys[:-1]):
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise NmtError(f"--set {text!r}: {'.'.join(keys[: i + 1])} is not a section")
            node = child
        node[keys[-1]] = value
    return data


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Parse a YAML mapping safely; errors name the file (and line)."""
    path = Path(path)
    if path.is_dir():
        recipe = path / "recipe.yaml"  # a run directory: the recipe it was trained with
        hint = f"; its run's recipe is {recipe}" if recipe.is_file() else ""
        raise NmtError(f"{path}: a directory, not a YAML file{hint}")
    if not path.is_file():
        raise NmtError(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    data = path.read_bytes()
    if data.startswith(b"PK\x03\x04"):  # torch.save writes zip archives
        raise NmtError(f"{path}: a checkpoint (or another zip archive), not a YAML file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise NmtError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or "invalid YAML"
        raise NmtError(f"{path}:{where}: not valid YAML ({problem})") from None
    if not isinstance(data, dict):
        raise NmtError(f"{path}: a recipe must be a YAML mapping, got {_type_name(data)}")
    if (twice := duplicate_key(yaml.compose(text, Loader=yaml.SafeLoader))) is not None:
        key, first, second = twice
        raise NmtError(f"{path}: line {second}: key {key!r} given twice (first on line {first})")
    return data


def duplicate_key(
    node: yaml.Node | None, seen: set[int] | None = None
) -> tuple[str, int, int] | None:
    """The first key that a YAML mapping repeats, with both lines (YAML itself keeps
    the last silently, so a second variant of one name would replace the first). An
    alias is the node it names, visited once: nested aliases (a "billion laughs"
    file) would otherwise be walked once per path to them."""
    seen = set() if seen is None else seen
    if node is None or id(node) in seen:
        return None
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        lines: dict[str, int] = {}
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                line = key.start_mark.line + 1
                if key.value in lines:
                    return key.value, lines[key.value], line
                lines[key.value] = line
            if (found := duplicate_key(value, seen)) is not None:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            if (found := duplicate_key(item, seen)) is not None:
                return found
    return None
