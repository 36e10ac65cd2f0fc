"""The model code an export carries (nmt.export.vendor): every module a model of
any registered kind needs, renamed to a private package and otherwise as written."""

from __future__ import annotations

import ast
import re

import pytest

from nmt.export.vendor import closure, module_file, renamed, vendored_code
from nmt.setup.attention import ATTENTION
from nmt.setup.model import DECODERS, ENCODER_BLOCKS, POSITIONS


@pytest.mark.parametrize("registry", [ATTENTION, POSITIONS, ENCODER_BLOCKS, DECODERS])
def test_the_closure_holds_every_registered_entry_and_its_contract(registry):
    """Every entry nmt registers (a plug-in that another test loaded into this
    process registers its own, which is not nmt's to carry)."""
    modules = set(closure())
    for name in registry.names():
        module = registry.get(name).__module__
        assert module in modules or not module.startswith("nmt."), (registry.what, name)
    contract = registry.base.partition(":")[0]
    assert contract in modules or not contract.startswith("nmt."), contract


def test_renaming_touches_nmt_imports_and_registry_targets_only():
    source = (
        "from nmt.errors import NmtError  # nmt.errors stays in comments\n"
        "import nmt.model.layers\n"
        "from nmt import __version__\n"
        "GROUP = 'nmt.plugins'\n"
        'TARGET = "nmt.model.positions:RoPE"\n'
        "TEXT = f'nmt.model.positions:RoPE'\n"
        "def lazy():\n"
        "    from nmt.setup.plugins import load_installed\n"
        "    return 'nmt' + '.x'\n"
    )
    out = renamed(source, "nmt_export_0", "example")
    assert out == (
        "from nmt_export_0.errors import NmtError  # nmt.errors stays in comments\n"
        "import nmt_export_0.model.layers\n"
        "from nmt_export_0 import __version__\n"
        "GROUP = 'nmt.plugins'\n"
        'TARGET = "nmt_export_0.model.positions:RoPE"\n'
        "TEXT = f'nmt.model.positions:RoPE'\n"
        "def lazy():\n"
        "    from nmt_export_0.setup.plugins import load_installed\n"
        "    return 'nmt' + '.x'\n"
    )


def test_an_import_the_renaming_cannot_place_is_refused():
    with pytest.raises(AssertionError, match="example:1: an nmt import left unrenamed"):
        renamed("import os, nmt.errors\n", "nmt_export_0", "example")


def test_the_written_file_holds_each_module_as_written_but_for_the_renaming():
    text = vendored_code()
    tree = ast.parse(text)
    values = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in ([node.target] if isinstance(node, ast.AnnAssign) else node.targets)
    }
    package = ast.literal_eval(values["PACKAGE"])
    sources = ast.literal_eval(values["SOURCES"])
    assert re.fullmatch(r"nmt_export_[0-9a-f]{16}", package)
    assert sorted(sources) == sorted(name[4:] for name in closure())
    for name, source in sources.items():
        original = module_file("nmt" + (f".{name}" if name else "")).read_text()
        assert source.replace(package, "nmt") == original, name
    # transformers reads a remote file's imports line by line: none of the copy's
    assert not re.search(r"^\s*(import|from)\s+nmt", text, flags=re.MULTILINE)


def test_every_module_the_modelling_file_asks_for_is_carried():
    import nmt.export.modeling_nmt as modeling

    with open(modeling.__file__, encoding="utf-8") as f:
        asked = set(re.findall(r'nmt_module\("([\w.]+)"\)', f.read()))
    assert asked and asked <= set(closure())
