"""A small name -> class registry for plug-ins (attention variants, trainers, blocks).

An entry may carry its own config dataclass (fairseq's ``dataclass=`` pattern):
``@ATTENTION.register("local_p", config=LocalPConfig)``. A recipe section whose
field names the registry (:func:`nmt.config.registered`) is then read into the
config of the entry its ``kind`` key names.

A registry names the modules that hold its built-in entries; they are imported
at the first lookup, so that a config module can name its registry without
importing the (heavier) modules that fill it, and without an import cycle.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from typing import Generic, TypeVar

from nmt.errors import NmtError, shown

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to classes (and their configs); ``get`` on an unknown name lists
    the valid ones."""

    def __init__(self, what: str, modules: tuple[str, ...] = ()) -> None:
        self.what = what
        self._modules = modules  # imported at the first lookup (they register the built-ins)
        self._items: dict[str, T] = {}
        self._configs: dict[str, type] = {}

    def _load(self) -> None:
        modules, self._modules = self._modules, ()
        for module in modules:
            importlib.import_module(module)

    def register(self, name: str, config: type | None = None) -> Callable[[T], T]:
        def add(item: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.what} {name!r} registered twice")
            self._items[name] = item
            if config is not None:
                self._configs[name] = config
            return item

        return add

    def get(self, name: str) -> T:
        self._load()
        if name not in self._items:
            raise NmtError(self.unknown(name))
        return self._items[name]

    def config(self, name: str) -> type:
        """The config dataclass registered with ``name``."""
        self.get(name)
        return self._configs[name]

    def unknown(self, name: object) -> str:
        """The message for an unknown name, with a close match if there is one."""
        text = name[:100] if isinstance(name, str) else shown(name)
        close = difflib.get_close_matches(text, self.names(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown {self.what} {shown(name)}{hint}; valid: {', '.join(self.names())}"

    def names(self) -> list[str]:
        self._load()
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._items
