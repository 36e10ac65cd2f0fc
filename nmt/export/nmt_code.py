"""Where :mod:`nmt.export.modeling_nmt` finds nmt's model code.

In nmt this module has no ``SOURCES`` and hands out the installed package's
modules. ``nmt export --format hf`` writes an export's own ``nmt_code.py`` from
this file with ``SOURCES`` filled (:mod:`nmt.export.vendor`): the source of every
module the model needs, its ``nmt`` imports renamed to ``PACKAGE``, a private
name that holds the exporting version's digest. An import hook serves them under
that name, so that the export loads with transformers and torch alone, runs the
code it was trained with whatever nmt the loading machine has (or none), and two
exports of different versions live side by side in one process.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

PACKAGE = "nmt"  # an export's: nmt_export_<digest>
SOURCES: dict[str, str] = {}  # module name under PACKAGE ("" for itself) -> its source
PACKAGES: frozenset[str] = frozenset()  # the names in SOURCES that are packages


class CopiedCode(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds and executes the modules of ``PACKAGE`` from ``SOURCES``."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        name = relative(fullname)
        if name is None or name not in SOURCES:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=name in PACKAGES)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module

    def exec_module(self, module: ModuleType) -> None:  # a module find_spec found
        name = relative(module.__name__)
        where = f"<{PACKAGE}>/{(name or '__init__').replace('.', '/')}.py"  # for tracebacks
        exec(compile(SOURCES[name], where, "exec"), module.__dict__)


def relative(fullname: str) -> str | None:
    """``fullname``'s name inside ``PACKAGE`` ("" for the package), or None."""
    if fullname == PACKAGE:
        return ""
    return fullname[len(PACKAGE) + 1 :] if fullname.startswith(PACKAGE + ".") else None


def nmt_module(name: str) -> ModuleType:
    """nmt's module ``name`` (e.g. ``"nmt.model.seq2seq"``): the export's copy where
    this file holds one, else the installed package's."""
    if not SOURCES:
        return importlib.import_module(name)
    if not any(isinstance(f, CopiedCode) for f in sys.meta_path):  # this file's class
        sys.meta_path.append(CopiedCode())
    return importlib.import_module(PACKAGE + name[len("nmt") :])
