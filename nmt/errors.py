"""User-facing errors: one line, exit code 2, never a traceback."""

from __future__ import annotations


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
