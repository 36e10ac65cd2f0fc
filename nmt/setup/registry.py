"""A small name -> class registry for plug-ins (attention variants, trainers, blocks).

Every entry is added the same way, built-in or a user's plug-in, with
:meth:`Registry.register`: a name, the entry's config dataclass (fairseq's
``dataclass=`` pattern) and what it builds. A recipe section whose field names
the registry (:func:`nmt.setup.config.by_kind`) is read into the config of the entry
its ``kind`` key names.

What an entry builds may be given as ``"module:attribute"`` and is imported at
its first :meth:`Registry.get`: the built-ins are added so, beside their configs
in torch-free modules (``nmt/*/config.py``), so that reading and checking a
recipe loads no model code and no torch. A name no entry has yet first loads
the installed plug-ins (:mod:`nmt.setup.plugins`).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from nmt.errors import NmtError, shown

T = TypeVar("T")


def _resolve(target: str) -> Any:
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


class Registry(Generic[T]):
    """Maps names to classes (and their configs); ``get`` on an unknown name lists
    the valid ones. ``base`` ("module:Class", imported when first needed): the
    class every entry must subclass, checked when the entry is registered (a class)
    or first imported (a "module:attribute" target)."""

    def __init__(self, what: str, base: str | None = None) -> None:
        self.what = what
        self.base = base
        self._items: dict[str, T | str] = {}  # a class, or "module:attr" not yet imported
        self._configs: dict[str, type] = {}

    def register(
        self, name: str, config: type | None = None, target: str | None = None
    ) -> Callable[[T], T]:
        """Add ``name``: with ``target`` ("module:attribute", imported when first
        needed) at once, else as a decorator of the class itself. A name that is not
        a string, a config that is not a dataclass, or a class that does not
        subclass the registry's ``base`` is refused here, not when a recipe uses it."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"a {self.what} is registered under a non-empty string, not {name!r}")
        if config is not None and not (
            isinstance(config, type) and dataclasses.is_dataclass(config)
        ):
            raise TypeError(f"{self.what} {name!r}: its config must be a dataclass, not {config!r}")

        def add(item: T | str) -> Any:
            if name in self._items:
                raise ValueError(f"{self.what} {name!r} registered twice")
            if not isinstance(item, str):
                self._check(name, item)
            self._items[name] = item
            if config is not None:
                self._configs[name] = config
            return item

        if target is not None:
            add(target)
        return add

    def unregister(self, name: str) -> None:
        """Remove ``name`` and its config. A second :meth:`register` of a name is
        refused, so a notebook that runs a plug-in's cell again unregisters it first."""
        if name not in self._items:
            raise NmtError(self.unknown(name))
        del self._items[name]
        self._configs.pop(name, None)

    def known(self, name: str) -> bool:
        """Whether ``name`` is registered, once installed plug-ins (entry points of the
        group ``nmt.plugins``) have had their chance to register it."""
        if name not in self._items:
            from nmt.setup.plugins import load_installed

            load_installed()
        return name in self._items

    def get(self, name: str) -> T:
        if not self.known(name):
            raise NmtError(self.unknown(name))
        item = self._items[name]
        if isinstance(item, str):
            item = self._check(name, _resolve(item))
            self._items[name] = item
        return item

    def _check(self, name: str, item: Any) -> Any:
        """``item`` if it is a class that subclasses ``base``; else a TypeError."""
        if self.base is None:
            return item
        base = _resolve(self.base)
        if not (isinstance(item, type) and issubclass(item, base)):
            raise TypeError(
                f"{self.what} {name!r}: {item!r} does not subclass {base.__module__}."
                f"{base.__qualname__}, the contract every {self.what} implements"
            )
        return item

    def config(self, name: str) -> type:
        """The config dataclass registered with ``name`` (nothing is imported)."""
        if not self.known(name):
            raise NmtError(self.unknown(name))
        return self._configs[name]

    def unknown(self, name: object) -> str:
        """The message for an unknown name, with a close match if there is one; where
        nothing is registered (decoding remedies have none built in), it says so."""
        if not self.names():
            return (f"unknown {self.what} {shown(name)}; none is registered "
                    f"(a plug-in registers one: docs/extending.md)")  # fmt: skip
        text = name[:100] if isinstance(name, str) else shown(name)
        close = difflib.get_close_matches(text, self.names(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown {self.what} {shown(name)}{hint}; valid: {', '.join(self.names())}"

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items
