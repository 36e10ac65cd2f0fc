"""A small name -> class registry for plug-ins (attention variants, trainers)."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Generic, TypeVar

from nmt.errors import NmtError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to classes; ``get`` on an unknown name lists the valid ones."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def add(item: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.what} {name!r} registered twice")
            self._items[name] = item
            return item

        return add

    def get(self, name: str) -> T:
        if name not in self._items:
            close = difflib.get_close_matches(name, self.names(), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            valid = ", ".join(self.names())
            raise NmtError(f"unknown {self.what} {name!r}{hint}; valid: {valid}")
        return self._items[name]

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: str) -> bool:
        return name in self._items
