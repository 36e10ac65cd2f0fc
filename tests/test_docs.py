"""Every command line shown to users, in the README, docs/ and each command's --help
example, is one the CLI accepts: the command exists, each option is one of its own,
and a recipe or spec named with ``--set`` overrides loads with them (recipe keys are
strict, so a renamed key breaks its examples here, not in a user's shell)."""

from __future__ import annotations

import dataclasses
import re
import shlex
import typing
from pathlib import Path

import pytest
import typer
import yaml

from nmt.attention.base import SCORES
from nmt.cli import app
from nmt.setup.attention import ATTENTION
from nmt.setup.compare import CompareSpec, load_spec
from nmt.setup.model import DECODERS, ENCODER_BLOCKS
from nmt.setup.recipe import RunConfig, load_recipe
from nmt.setup.training import TRAINERS

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CLI = typer.main.get_command(app)
SHELL = {"|", "&&", ";", ">", "&"}


def code_blocks(text: str) -> list[str]:
    return re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M)


def command_lines(text: str) -> list[list[str]]:
    """The ``nmt`` invocations of shell text, continuation lines joined and pipelines
    split, as argument lists without the leading ``nmt``: at the start of a command,
    after ``-m`` (torchrun) or after a label (``data-parallel: nmt ...``)."""
    found = []
    for line in text.replace("\\\n", " ").splitlines():
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError:  # not shell (a YAML or Python block)
            continue
        segment: list[str] = []
        for token in [*tokens, "|"]:
            if token not in SHELL:
                segment.append(token)
                continue
            starts = [
                i
                for i, t in enumerate(segment)
                if t == "nmt" and (i == 0 or segment[i - 1] == "-m" or segment[i - 1][-1] == ":")
            ]
            args = segment[starts[0] + 1 :] if starts else []
            named = [t for t in args if not t.startswith("-")][:1]
            if args and not (named and named[0].isupper()):  # not nmt COMMAND --help
                found.append(args)
            segment = []
    return found


def help_examples() -> list[tuple[str, list[str]]]:
    """The command lines of each command's ``Example: ...`` epilog, asides included."""
    found = []

    def walk(command, path):
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])
        aside = re.sub(r"[();]", " ; ", command.epilog or "")
        found.extend((" ".join(path) or "nmt", args) for args in command_lines(aside))

    walk(CLI, [])
    return found


def shown_text(page: Path) -> list[str]:
    """A page's code blocks and its inline ``nmt ...`` spans (synopses like
    ``nmt evaluate RUN [--split NAME ...]`` included)."""
    text = page.read_text(encoding="utf-8")
    spans = re.findall(r"`(nmt [^`]*)`", text)
    return [*code_blocks(text), *(re.sub(r"\[(-[^\]]*)\]", r"\1", s) for s in spans)]


SHOWN = [
    pytest.param(args, id=f"{page.name}: nmt {' '.join(args)}"[:120])
    for page in PAGES
    for text in shown_text(page)
    for args in command_lines(text)
] + [
    pytest.param(args, id=f"--help of {where}: nmt {' '.join(args)}"[:120])
    for where, args in help_examples()
]


def resolve(args: list[str]) -> tuple[object, list[str], list[str]]:
    """(the command ``args`` name, the options given before it, its own arguments)."""
    command, before, rest = CLI, [], list(args)
    while hasattr(command, "commands"):
        while rest and rest[0].startswith("-"):
            before.append(rest.pop(0))
        if not rest:  # nmt --version
            break
        assert rest[0] in command.commands, f"no command {rest[0]!r} in: nmt {' '.join(args)}"
        command = command.commands[rest.pop(0)]
    return command, before, rest


def option_names(command) -> set[str]:
    return {o for p in command.params for o in [*p.opts, *p.secondary_opts]} | {"--help"}


def test_the_pages_show_command_lines_at_all():
    assert len(SHOWN) > 50
    assert {args[0] for args in (p.values[0] for p in SHOWN)} >= {"train", "compare", "data"}


@pytest.mark.parametrize("args", SHOWN)
def test_every_shown_command_line_uses_options_its_command_has(args):
    command, before, rest = resolve(args)
    assert set(before) <= option_names(CLI), f"nmt {' '.join(args)}"
    options = [t.split("=", 1)[0] for t in rest if t.startswith("-") and t != "-"]
    unknown = [o for o in options if o not in option_names(command)]
    assert not unknown, f"nmt {' '.join(args)}: {command.name} has no {', '.join(unknown)}"


def overrides(rest: list[str]) -> list[str]:
    sets = []
    for i, token in enumerate(rest):
        if token == "--set":
            sets.append(rest[i + 1])
        elif token.startswith("--set="):
            sets.append(token.removeprefix("--set="))
    return sets


def shipped_file(args: list[str]) -> list[str]:
    """The shipped recipe or spec a train, compare or data prepare line names, if any."""
    command, _, rest = resolve(args)
    files = [t for t in rest if t.endswith(".yaml") and (ROOT / t).is_file()]
    return files[:1] if command.name in ("train", "compare", "prepare") else []


def plugins_of(args: list[str]) -> tuple[str, ...]:
    """The plug-ins a line names with --plugin."""
    return tuple(args[i + 1] for i, token in enumerate(args[:-1]) if token == "--plugin")


# A line's plug-in is a shipped file, or a module of tests/plugins (docs/extending.md
# copies it to a directory on PYTHONPATH first); a placeholder (FILE, ...) is not run.
LOADED = [
    p for p in SHOWN
    if shipped_file(p.values[0]) and "..." not in p.values[0]
    and all(name.endswith(".py") or (ROOT / "tests/plugins" / f"{name}.py").is_file()
            for name in plugins_of(p.values[0]))
]  # fmt: skip


def test_most_recipe_lines_name_a_shipped_file():
    assert len(LOADED) > 30
    assert sum(bool(plugins_of(p.values[0])) for p in LOADED) >= 3


@pytest.mark.parametrize("args", LOADED)
def test_every_shown_recipe_and_spec_loads_with_its_overrides(args, monkeypatch):
    """Run from the repository's root, as the pages do (what a line's plug-in registers
    is forgotten after the test: tests/conftest.py)."""
    (path,) = shipped_file(args)
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT / "tests/plugins"))
    if resolve(args)[0].name == "compare":
        load_spec(path, overrides(args), plugins=plugins_of(args))
    else:
        load_recipe(path, overrides(args), plugins=plugins_of(args))


def documented(name: str, text: str) -> bool:
    """Named in a code span (``train.lr``, ``score: trilinear``) or as a key in a
    YAML example."""
    word = rf"(?<![\w-]){re.escape(name)}(?![\w-])"
    spans = re.findall(r"`([^`\n]+)`", text)
    return any(re.search(word, span) for span in spans) or bool(
        re.search(rf"^\s*{re.escape(name)}:|[{{,]\s*{re.escape(name)}:", text, flags=re.M)
    )


def recipe_keys(cls: type, path: str = "") -> set[str]:
    """Every dotted key a config dataclass reads, the options of each registered kind
    included (``model.attention.window`` for each attention kind that has it)."""
    keys, hints = set(), typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = path + f.name
        keys.add(key)
        if "registry" in f.metadata:
            registry = f.metadata["registry"][0]
            for name in registry.names():
                keys |= recipe_keys(registry.config(name), key + ".")
            continue
        options = [hints[f.name], *typing.get_args(hints[f.name])]  # X or X | None
        for section in [t for t in options if dataclasses.is_dataclass(t)][:1]:
            keys |= recipe_keys(section, key + ".")
    return keys


DOCS = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
@pytest.mark.parametrize("cls", [RunConfig, CompareSpec], ids=["recipe", "compare spec"])
def test_every_recipe_and_spec_key_is_documented(cls):
    keys = recipe_keys(cls)
    assert len(keys) > (100 if cls is RunConfig else 15)
    missing = sorted(k for k in keys if not documented(k.rsplit(".", 1)[-1], DOCS))
    assert not missing, f"keys no page names: {missing}"


@pytest.mark.parametrize(
    "registry", [ATTENTION, SCORES, TRAINERS, ENCODER_BLOCKS, DECODERS], ids=lambda r: r.what
)
def test_every_registered_variant_is_documented(registry):
    missing = [name for name in registry.names() if not documented(name, DOCS)]
    assert not missing, f"{registry.what}s no page names: {missing}"


def test_every_install_hint_names_this_distribution_and_one_of_its_extras():
    """PyPI's ``nmt`` is another project: a hint must install this one
    (nmt.DISTRIBUTION, pyproject.toml's name) with an extra it declares."""
    import nmt

    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^name = "([^"]+)"', pyproject, re.M).group(1) == nmt.DISTRIBUTION
    optional = pyproject.split("[project.optional-dependencies]")[1].split("\n[")[0]
    extras = set(re.findall(r"^(\w+) = \[", optional, re.M))
    assert {"test", "tensorboard", "slurm"} <= extras
    texts = [p.read_text(encoding="utf-8") for p in PAGES]
    texts += [p.read_text(encoding="utf-8") for p in (ROOT / "nmt").rglob("*.py")]
    hints = [m for t in texts for m in re.findall(r"pip install (?:-e )?'([^']*)\[(\w+)\]'", t)]
    assert hints
    for dist, extra in hints:
        assert dist in (nmt.DISTRIBUTION, "."), f"pip install '{dist}[{extra}]'"
        assert extra in extras, extra
    used = set(re.findall(r"install_hint\(['\"](\w+)['\"]\)", "\n".join(texts)))
    assert used and used <= extras


def test_the_licence_and_the_citation_agree_with_the_package():
    """pyproject says MIT: the repository carries the licence text and a citation
    file GitHub and Zenodo read (CITATION.cff, schema 1.2.0)."""
    text = (ROOT / "pyproject.toml").read_text()
    project = dict(re.findall(r'^(license|version) = "([^"]+)"', text, flags=re.M))
    assert project["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["license"] == project["license"]
    assert cff["version"] == project["version"] and cff["title"] and cff["authors"]
