"""User-facing errors: one line, exit code 2, never a traceback."""

from __future__ import annotations

import reprlib
from typing import Any

# How an error message quotes a value: a few items and characters of it, however
# large it is (a "billion laughs" recipe nests lists a hundred million items deep).
_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 1, 60, 60
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = _SHORT.maxset = 4


def shown(value: Any) -> str:
    """``repr(value)`` for an error message, cut short where it is long."""
    return _SHORT.repr(value)


def brief(error: BaseException, limit: int = 200) -> str:
    """Another library's error as one line of at most ``limit`` characters, to quote
    inside ours (PyTorch's and pybind's run to many lines)."""
    text = " ".join(str(error).split())
    return text if len(text) <= limit else text[:limit] + "…"


class NmtError(Exception):
    """Bad input from the user (recipe, data, checkpoint, arguments)."""


class ConfigError(NmtError):
    """A recipe value is wrong; ``key`` is the dotted path inside the recipe."""

    def __init__(self, key: str, message: str) -> None:
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}" if key else message)

    def under(self, prefix: str) -> ConfigError:
        """The same error seen from the enclosing section ``prefix``."""
        if not prefix:
            return self
        return ConfigError(f"{prefix}.{self.key}" if self.key else prefix, self.message)
