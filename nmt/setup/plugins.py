"""Plug-ins: a user's module that registers attention kinds, trainers, encoder
blocks or decoders (``ATTENTION.register(...)`` and the like) from outside the
package, so that they train, resume, translate and compare like the built-ins.

A plug-in is named by its module (``my_lab.attention``, importable from
``PYTHONPATH``) or by the path of a ``.py`` file, in three ways: ``--plugin``
on ``nmt train``, ``compare`` and ``translate``; a recipe's or spec's
``plugins:`` list; or a Python entry point in the group ``nmt.plugins`` of an
installed package (loaded the first time a registry meets a name it does not
know). The plug-ins a run was trained with are stored in its recipe, so its
checkpoints load again wherever those plug-ins can be imported.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import traceback
from collections.abc import Iterable
from importlib.metadata import entry_points
from pathlib import Path

from nmt.errors import NmtError, brief

GROUP = "nmt.plugins"
_loaded: set[str] = set()
# a .py file's name -> the file given with --plugin, which stands in for a stored
# plug-in of that name (a run moved to another place or machine with its plug-in)
_stand_ins: dict[str, str] = {}


def resolved(name: str) -> str:
    """A plug-in's name as it is stored: a ``.py`` file by its absolute, resolved
    path (so that a run names it the same from any directory, and two spellings of
    one file are one plug-in), a module by its name."""
    return str(Path(name).resolve()) if name.endswith(".py") else name


def stand_in(name: str) -> str:
    """A plug-in's stored name, or the ``--plugin`` file of the same file name given
    to stand in for it."""
    name = resolved(name)
    return _stand_ins.get(Path(name).name, name) if name.endswith(".py") else name


def import_plugins(names: Iterable[str], why: str = "", given: bool = False) -> None:
    """Import each plug-in once; one that cannot be imported is one line naming it
    (and ``why`` it is needed). ``given``: named by the user (``--plugin``), so that
    each ``.py`` file stands in for a stored one of its file name."""
    names = [resolved(n) for n in names]
    if given:
        _stand_ins.update({Path(n).name: n for n in names if n.endswith(".py")})
    for name in map(stand_in, names):
        if name in _loaded:
            continue
        try:
            if name.endswith(".py"):
                _import_file(Path(name))
            else:
                importlib.import_module(name)
        except NmtError:
            raise
        except SystemExit as e:  # sys.exit() at import would end the command, unexplained
            raise NmtError(
                f"plug-in {name!r}{why} called sys.exit({e.code!r}) while it was imported"
            ) from None
        except ModuleNotFoundError as e:
            if e.name is not None and name.startswith(e.name):
                raise NmtError(
                    f"plug-in {name!r}{why} is not installed: no module {e.name!r} "
                    "(install it, or put its directory on PYTHONPATH)"
                ) from None
            raise NmtError(f"plug-in {name!r}{why} failed to import: {brief(e)}") from None
        except Exception as e:  # a user's module can fail in any way
            where = traceback.extract_tb(e.__traceback__)[-1]
            raise NmtError(
                f"plug-in {name!r}{why} failed to import ({where.filename}:{where.lineno}: "
                f"{type(e).__name__}: {brief(e)})"
            ) from None
        _loaded.add(name)


def _import_file(path: Path) -> None:
    if not path.is_file():
        raise NmtError(
            f"plug-in {path}: no such file (a run moved with its plug-in: name the file "
            "where it is now with --plugin)"
        )
    # the file's own module name: two files of one stem (lab/a/attn.py, lab/b/attn.py)
    # must not share one, and a worker process that imports the file gets the same
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]
    module = f"nmt_plugin_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(module, path)
    if spec is None or spec.loader is None:
        raise NmtError(f"plug-in {path}: not a Python module")
    sys.modules[module] = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(sys.modules[module])
    except BaseException:
        del sys.modules[module]
        raise


def load_installed() -> None:
    """Import every installed package's ``nmt.plugins`` entry points, once."""
    if GROUP in _loaded:
        return
    _loaded.add(GROUP)
    for point in entry_points(group=GROUP):
        import_plugins([point.module], f" (entry point {point.name} of {GROUP})")


def with_plugins(data: dict, extra: Iterable[str] = (), why: str = "") -> dict:
    """A recipe (or spec) mapping with ``extra`` plug-ins added to its ``plugins:``
    list, after importing them all; the key is left out when there are none, so
    that a recipe without plug-ins reads as before."""
    given = data.get("plugins", [])
    if not isinstance(given, list) or not all(isinstance(p, str) and p for p in given):
        raise NmtError("plugins: expected a list of module names or .py paths")
    import_plugins(extra, why, given=True)
    names = list(dict.fromkeys(stand_in(n) for n in [*given, *extra]))
    import_plugins(names, why)
    return {**data, "plugins": names} if names else data
