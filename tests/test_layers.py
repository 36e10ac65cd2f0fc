"""The package is built in floors (docs/design.md, "How the code is laid out"): a
folder or top-level module imports only those on the floors below it, at the top
of a file, inside a function or under ``if TYPE_CHECKING`` alike; every one is on
a floor."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nmt"


def floors() -> dict[str, int]:
    """Each unit (a folder of nmt, or a top-level module) and its floor, 0 the lowest,
    from docs/design.md's table, whose first row is the top floor."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    table = text.split("## How the code is laid out")[1].split("| floor |")[1]
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    found = {}
    for n, row in enumerate(reversed(rows)):
        for name in re.findall(r"`nmt/([a-z_]+)(?:/|\.py)`", row.split("|")[1]):
            found[name] = n
    return found


def unit_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else path.stem


def imported_units(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, unit) of every import of nmt in the module, wherever it stands."""
    out = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        units = [
            p[1] if len(p) > 1 else "__init__" for n in names if (p := n.split("."))[0] == "nmt"
        ]
        out += [(node.lineno, unit) for unit in dict.fromkeys(units)]
    return out


def test_every_unit_of_the_package_has_a_floor():
    units = {unit_of(p) for p in PACKAGE.rglob("*.py")}
    assert units - floors().keys() == set(), "add them to docs/design.md's table"
    assert floors().keys() - units == set(), "docs/design.md names what is not there"


def test_no_import_runs_up_or_across_a_floor():
    floor = floors()
    up = []
    for path in sorted(PACKAGE.rglob("*.py")):
        me = unit_of(path)
        for line, other in imported_units(ast.parse(path.read_text(encoding="utf-8"))):
            if other != me and other in floor and floor[other] >= floor[me]:
                up.append(f"{path.relative_to(ROOT)}:{line} imports nmt.{other}")
    assert up == []


def test_the_checker_sees_imports_inside_functions_and_for_annotations_alone():
    code = "def f():\n    from nmt.compare import x\nif TYPE_CHECKING:\n    import nmt.cli\n"
    assert imported_units(ast.parse(code)) == [(2, "compare"), (4, "cli")]
