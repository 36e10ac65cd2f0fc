"""The copy of nmt's model code that a remote-code export carries (``nmt_code.py``).

The modules are the import closure of what builds a model from its recipe section
(:data:`SEEDS`): every ``nmt`` import, module-level or inside a function, and every
module a registry names by a ``"module:attribute"`` string (each attention kind,
position scheme, encoder block and decoder), so that any recipe the exporting
version builds, the copy builds. Their ``nmt`` imports and those strings are
renamed to a private package, ``nmt_export_<digest of the sources>``; the rest of
each source is kept byte for byte. :mod:`nmt.export.nmt_code` serves them.
"""

from __future__ import annotations

import ast
import hashlib
import io
import re
import tokenize
from pathlib import Path

import nmt

# what modeling_nmt.py asks nmt_code for; the rest is their closure
SEEDS = (
    "nmt.errors",
    "nmt.model.seq2seq",
    "nmt.setup.config",
    "nmt.setup.migrations",
    "nmt.setup.model",
)
TARGET = re.compile(r"^nmt((?:\.\w+)+):\w+$")  # a registry's "module:attribute"
ROOT = Path(nmt.__file__).parent
TEMPLATE = Path(__file__).with_name("nmt_code.py")  # the export's nmt_code.py, unfilled


def module_file(name: str) -> Path:
    """The source file of nmt's module ``name``."""
    parts = name.split(".")[1:]
    package = ROOT.joinpath(*parts, "__init__.py")
    return package if package.is_file() else ROOT.joinpath(*parts).with_suffix(".py")


def imported(name: str) -> set[str]:
    """The nmt modules that module ``name`` imports or names as a registry target."""
    tree = ast.parse(module_file(name).read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom | ast.Import):
            found |= nmt_names(node)
        elif isinstance(node, ast.Constant) and (match := TARGET.match(str(node.value))):
            found.add("nmt" + match.group(1))
    return {n for n in found if module_file(n).is_file()}


def closure(seeds: tuple[str, ...] = SEEDS) -> list[str]:
    """The seeds, what they import (transitively) and the packages above each, sorted."""
    seen: set[str] = set()
    todo = list(seeds)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # the packages above
        todo += sorted(imported(name))
    return sorted(seen)


def renamed(source: str, package: str, where: str) -> str:
    """``source`` with every import of ``nmt`` and every registry target naming an
    nmt module renamed to ``package``; nothing else changes. A reference the renaming
    missed (an import left on ``nmt``) is an error here, not at load time."""
    lines = source.splitlines(keepends=True)
    edits: list[tuple[int, int, int, str]] = []  # (row, start, end, text)
    previous = None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        plain = tok.type == tokenize.STRING and tok.string[0] in "'\""  # no prefix
        if tok.type == tokenize.NAME and tok.string == "nmt" and previous in ("from", "import"):
            edits.append((tok.start[0], tok.start[1], tok.end[1], package))
        elif plain and TARGET.match(tok.string[1:-1]):
            start = tok.start[1] + 1  # after the quote
            edits.append((tok.start[0], start, start + 3, package))
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            previous = tok.string
    for row, start, end, text in sorted(edits, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:start] + text + line[end:]
    out = "".join(lines)
    for node in ast.walk(ast.parse(out)):
        if isinstance(node, ast.ImportFrom | ast.Import) and nmt_names(node):
            raise AssertionError(f"{where}:{node.lineno}: an nmt import left unrenamed")
    return out


def nmt_names(node: ast.ImportFrom | ast.Import) -> set[str]:
    """The nmt modules an import statement names (``from nmt.x import y``: nmt.x and
    nmt.x.y, which may be a module)."""
    if isinstance(node, ast.ImportFrom):
        base = node.module if node.level == 0 and node.module else ""
        names = {base, *(f"{base}.{alias.name}" for alias in node.names)} if base else set()
    else:
        names = {alias.name for alias in node.names}
    return {n for n in names if n == "nmt" or n.startswith("nmt.")}


def vendored_code() -> str:
    """The text of an export's ``nmt_code.py``: nmt's own file with ``PACKAGE``,
    ``SOURCES`` and ``PACKAGES`` filled. Each source is one string literal on one
    line, so that transformers' scan of a remote file's imports, a line-by-line
    regular expression, reads none of the copied code's imports as the file's."""
    names = closure()
    original = {n: module_file(n).read_text(encoding="utf-8") for n in names}
    digest = hashlib.sha256(repr(sorted(original.items())).encode()).hexdigest()[:16]
    package = f"nmt_export_{digest}"
    sources = {n[4:]: renamed(text, package, n) for n, text in original.items()}
    packages = sorted(n[4:] for n in names if module_file(n).name == "__init__.py")
    entries = "".join(f"    {name!r}: {text!r},\n" for name, text in sources.items())
    filled = {
        "PACKAGE": f"PACKAGE = {package!r}\n",
        "SOURCES": f"SOURCES: dict[str, str] = {{\n{entries}}}\n",
        "PACKAGES": f"PACKAGES: frozenset[str] = frozenset({packages!r})\n",
    }
    template = TEMPLATE.read_text(encoding="utf-8").splitlines(keepends=True)
    out = []
    for line in template:
        key = line.split(" ", 1)[0].rstrip(":")
        out.append(filled.pop(key) if key in filled else line)
    if filled:
        raise AssertionError(f"nmt_code.py: no line assigns {', '.join(filled)}")
    return "".join(out)
