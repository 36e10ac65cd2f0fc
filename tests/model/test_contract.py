"""One closed cross-attention contract: no module of the model tests another's type,
fusion is a decoder-layer option whose earlier checkpoints and recipes still load,
and each sub-module keeps its own incremental state."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from nmt.errors import NmtError
from nmt.io import checkpoint
from nmt.setup.recipe import load_recipe
from tests.helpers import random_batch, tiny_model

PACKAGE = Path(__file__).resolve().parents[2] / "nmt"
FUSED = {"decoder": {"fusion": "bidaf"}}


MODEL_CODE = [*(PACKAGE / "model").glob("*.py"), *(PACKAGE / "attention").glob("*.py")]


def calls(name: str):
    """(file, call) for every call of the builtin ``name`` in the model's code."""
    for path in MODEL_CODE:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == name:
                yield path.name, node


def test_no_model_or_attention_module_tests_another_modules_type():
    """``isinstance`` in the model and the attention variants only ever asks about
    PyTorch's own types (``_init_weights`` dispatching on ``nn.Linear``), never about
    an nmt module: a decoder calls every cross-attention the same way."""
    for where, node in calls("isinstance"):
        asked = ast.unparse(node.args[1])
        assert asked.startswith(("nn.", "torch.")), f"{where}: isinstance(…, {asked})"


def test_no_model_or_attention_module_probes_another_for_an_attribute():
    """No ``hasattr``, and ``getattr`` only on the module's own fields: what one
    module needs of another is in the contract (a method, a typed field)."""
    assert not list(calls("hasattr"))
    for where, node in calls("getattr"):
        assert ast.unparse(node.args[0]) == "self", f"{where}: {ast.unparse(node)}"


def imports(path: Path) -> set[str]:
    """The nmt modules that ``path`` imports, at any level (type-only ones too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nmt"):
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("nmt")}
    return found


def module_name(path: Path) -> str:
    name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return name.removesuffix(".__init__")


def test_the_model_packages_import_each_other_one_way():
    """nmt.kernels, nmt.attention and nmt.model import each other in one direction
    only (kernels -> attention <- model), type-only imports included."""
    units = ("nmt.kernels", "nmt.attention", "nmt.model")
    edges = set()
    for unit in units:
        for path in (PACKAGE / unit.split(".")[1]).glob("*.py"):
            for name in imports(path):
                other = next((u for u in units if name == u or name.startswith(u + ".")), None)
                if other is not None and other != unit:
                    edges.add((unit, other))
    assert not {(a, b) for a, b in edges if (b, a) in edges}, sorted(edges)


def test_no_nmt_module_imports_itself_back():
    """No circle of imports between nmt's modules, type-only imports included."""
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        graph[module_name(path)] = imports(path)
    graph = {m: {n for n in names if n in graph and n != m} for m, names in graph.items()}
    state: dict[str, int] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = 1
        for nxt in sorted(graph[module]):
            assert state.get(nxt) != 1, " -> ".join([*trail, module, nxt])
            if nxt not in state:
                visit(nxt, [*trail, module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])


def test_the_registry_refuses_a_variant_that_does_not_implement_the_contract():
    from dataclasses import dataclass

    from torch import nn

    from nmt.attention.base import CrossAttention
    from nmt.setup.attention import ATTENTION, AttentionConfig

    @dataclass(frozen=True)
    class Odd(AttentionConfig):
        kind: str = "odd"

    with pytest.raises(TypeError, match=r"does not subclass nmt\.attention\.base\.CrossAttention"):
        ATTENTION.register("odd_module", Odd)(type("Plain", (nn.Module,), {}))
    with pytest.raises(TypeError, match=r"forward\(query, memory, src_mask.* does not follow"):
        type(
            "OldSignature",
            (CrossAttention,),
            {"forward": lambda self, query, memory, src_mask, positions, need_weights=False: 0},
        )
    with pytest.raises(TypeError, match="must be a dataclass"):
        ATTENTION.register("odd_config", dict)
    with pytest.raises(TypeError, match="non-empty string"):
        ATTENTION.register(3, Odd)
    assert "odd_module" not in ATTENTION and "odd_config" not in ATTENTION


def test_a_recipe_naming_attention_fusion_is_refused_with_the_new_key(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "run_dir: x\ndata: {dir: ., src_lang: a, tgt_lang: b}\n"
        "model: {attention: {kind: global, fusion: bidaf}}\n"
    )
    with pytest.raises(NmtError, match=r"model\.attention\.fusion: .* set model\.decoder\.fusion"):
        load_recipe(recipe)


@pytest.mark.parametrize(("kind", "own"), [("global", None), ("local_s", {"center"})])
def test_incremental_state_is_kept_per_sub_module(kind, own):
    """Each decoder layer's cache holds its self-attention's keys and values, its
    cross-attention's own state (local_s: its last centre, which reaches it as its
    forward's ``state`` argument; a variant whose forward takes none has none) and
    its fusion's history apart, each under the sub-module's name."""
    model = tiny_model(kind, model=FUSED).eval()
    memory, src_mask = model.encode(random_batch([5, 3]))
    state = model.decoder_state(memory, src_mask, incremental=True)
    model.decode(random_batch([1, 1]), state)
    for cache in state.caches:
        assert set(cache) == {"self_attn", "fusion"} | ({"cross_attn"} if own else set())
        assert set(cache["self_attn"]) == {"key", "value"} and set(cache["fusion"]) == {"m", "h"}
        assert own is None or set(cache["cross_attn"]) == own


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_a_run_stored_in_the_earlier_layout_resumes(tiny_config):
    """Its recipe has no ``plugins`` and says ``model.attention.fusion``: the keys
    added since read at their defaults and the moved key is read where it is now,
    so the resume sees no change of recipe (it refused "plugins None -> []")."""
    from nmt.training.run import train

    cfg = tiny_config(train={"max_steps": 2, "valid_every": 2})
    train(cfg, device="cpu")
    last = Path(cfg.run_dir) / "last.pt"
    payload = checkpoint.load(last)
    stored = payload["config"]
    stored.pop("plugins")
    stored.pop("version")  # recipes had none then
    stored["model"]["attention"]["fusion"] = stored["model"]["decoder"].pop("fusion")
    checkpoint.save(last, {k: v for k, v in payload.items() if k != "format"})
    longer = tiny_config(train={"max_steps": 4, "valid_every": 2})
    train(longer, device="cpu", resume=True)
    assert checkpoint.load(last)["state"]["step"] == 4
