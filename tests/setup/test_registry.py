import ast
import importlib
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from nmt.compare.metrics import METRICS
from nmt.errors import NmtError
from nmt.setup import plugins
from nmt.setup.compare import LAUNCHERS
from nmt.setup.plugins import import_plugins
from nmt.setup.registry import Registry
from tests.conftest import REGISTRIES, _forget_plugins, _plugins_known


def test_get_unknown_lists_names_and_suggests():
    r: Registry[type] = Registry("widget")
    r.register("local_p")(int)
    r.register("global")(str)
    assert r.get("global") is str
    with pytest.raises(NmtError, match=r"did you mean 'local_p'.*valid: global, local_p"):
        r.get("lokal_p")


def test_an_empty_registry_says_none_is_registered():
    """Decoding remedies have no built-in kind: the message listed nothing after
    "valid:"."""
    r: Registry[type] = Registry("widget")
    with pytest.raises(NmtError, match=r"^unknown widget 'a'; none is registered \(a plug-in"):
        r.get("a")


def test_double_registration_is_a_bug():
    r: Registry[type] = Registry("widget")
    r.register("a")(int)
    with pytest.raises(ValueError):
        r.register("a")(str)


def test_an_unregistered_name_can_be_registered_again():
    """What a notebook does to run a plug-in's cell a second time."""

    @dataclass(frozen=True)
    class WidgetConfig:
        kind: str = "a"

    r: Registry[type] = Registry("widget")
    r.register("a", WidgetConfig)(int)
    r.unregister("a")
    assert "a" not in r and r.names() == []
    with pytest.raises(NmtError, match="unknown widget 'a'"):
        r.config("a")
    r.register("a")(str)
    assert r.get("a") is str
    with pytest.raises(NmtError, match="unknown widget 'b'; valid: a"):
        r.unregister("b")


def test_the_suite_forgets_what_every_registry_of_the_package_gained_in_a_test():
    """Each module-level ``Registry(...)`` of the package is one the suite's guard
    (tests/conftest.py) puts back after every test: a new registry missing from it
    would keep a test's plug-in entries for the tests after it."""
    root = Path(__file__).resolve().parents[2]
    found = []
    for path in sorted((root / "nmt").rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "Registry":
                target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                module = ".".join(path.relative_to(root).with_suffix("").parts)
                found.append(getattr(importlib.import_module(module), target.id))
    assert len(found) >= 8 and all(isinstance(r, Registry) for r in found)
    assert {id(r) for r in found} == {id(r) for r in REGISTRIES}


def test_a_plugin_registered_in_one_test_is_unknown_to_the_next(tmp_path):
    """What the guard does, in one test: a plug-in file's kind and metric, then the
    guard's put-back, then the same file imported again registers them again."""
    plugin = tmp_path / "shapes.py"
    plugin.write_text(
        "from nmt.compare.metrics import Metric, register\n"
        "from nmt.setup.compare import LAUNCHERS\n"
        "LAUNCHERS.register('shapes', target='nmt.launch.runs:Launcher')\n"
        "register(Metric('shapes', 'shapes', 0, 'run', frozenset({'csv'})))\n"
    )
    known = _plugins_known()
    for _ in range(2):
        import_plugins([str(plugin)])
        assert "shapes" in LAUNCHERS and "shapes" in METRICS and len(plugins._loaded) > 0
        _forget_plugins(known)
        assert "shapes" not in LAUNCHERS and "shapes" not in METRICS
        assert not any(m.startswith("nmt_plugin_shapes_") for m in sys.modules)
