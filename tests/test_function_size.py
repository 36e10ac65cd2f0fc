"""Every function of the package reads in one screen: none over 60 lines, and none
over 7 parameters but the CLI's commands, whose parameters are its options (a
function that needs more takes a typed options object, as ``import_corpus`` takes
``ImportOptions``)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "nmt"
MAX_LINES = 60
MAX_PARAMETERS = 7


def functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """From the ``def`` (its decorators left out) to the last line of the body."""
    return node.end_lineno - node.lineno + 1


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Parameters a caller passes: ``self`` and ``cls`` left out, ``*args`` and
    ``**kwargs`` not counted."""
    a = node.args
    named = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    return len([p for p in named if p.arg not in ("self", "cls")])


def is_command(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A Typer command (``@app.command(...)``, ``@data_app.command(...)``)."""
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Attribute) and target.attr == "command":
            return True
    return False


@functools.cache  # both tests read the package once
def offenders() -> tuple[list[str], list[str]]:
    long, wide = [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(PACKAGE.parent)
        for node in functions(tree):
            if lines(node) > MAX_LINES:
                long.append(f"{where}:{node.lineno} {node.name}: {lines(node)} lines")
            if parameters(node) > MAX_PARAMETERS and not is_command(node):
                wide.append(f"{where}:{node.lineno} {node.name}: {parameters(node)} parameters")
    return long, wide


def test_no_function_is_over_60_lines():
    long, _ = offenders()
    assert not long, "\n".join(long)


def test_no_function_but_a_command_takes_over_7_parameters():
    _, wide = offenders()
    assert not wide, "\n".join(wide)


def test_the_checker_counts_lines_and_parameters_as_a_reader_does():
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    source = (
        f"@decorator\ndef long(self, a, b, /, c, *args, d, e, f, g, h, **kwargs):\n{body}\n"
        "@app.command('x')\ndef command(a, b, c, d, e, f, g, h):\n    pass\n"
    )
    long, command = functions(ast.parse(source))
    assert lines(long) == MAX_LINES + 1 and parameters(long) == 8
    assert not is_command(long) and is_command(command) and parameters(command) == 8
