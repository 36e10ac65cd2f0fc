"""Environment variables that switch something on or off (``NMT_QUIET``,
``NMT_REQUIRE_DATA``): the usual spellings of true and false, in any case."""

from __future__ import annotations

import os
import sys

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off", "")


def flag(name: str) -> bool:
    """Whether the switch ``name`` is on; unset is off. A value that is neither true
    nor false is off, with a warning naming it (an import-time switch cannot stop
    the program with a clean error)."""
    value = os.environ.get(name, "").strip().lower()
    if value in TRUE:
        return True
    if value not in FALSE:
        sys.stderr.write(
            f"warning: {name}={os.environ[name]!r} is not a switch value "
            f"(true: {', '.join(TRUE)}; false: {', '.join(v for v in FALSE if v)}); "
            "taken as off\n"
        )
    return False
