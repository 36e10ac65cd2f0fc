"""One closed cross-attention contract: no module of the model tests another's type,
fusion is a decoder-layer option whose earlier checkpoints and recipes still load,
and each sub-module keeps its own incremental state."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from nmt import checkpoint
from nmt.data.vocab import PAD
from nmt.errors import NmtError
from nmt.model.load import load_model
from nmt.recipe import config_from_dict, load_recipe
from tests.helpers import random_batch, tiny_model

PACKAGE = Path(__file__).resolve().parents[2] / "nmt"
FUSED = {"decoder": {"fusion": "bidaf"}}


def test_no_model_or_attention_module_tests_another_modules_type():
    """``isinstance`` in the model and the attention variants only ever asks about
    PyTorch's own types (``_init_weights`` dispatching on ``nn.Linear``), never about
    an nmt module: a decoder calls every cross-attention the same way."""
    for path in [*(PACKAGE / "model").glob("*.py"), *(PACKAGE / "attention").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                asked = ast.unparse(node.args[1])
                assert asked.startswith(("nn.", "torch.")), f"{path.name}: isinstance(…, {asked})"


def old_names(weights: dict) -> dict:
    """A fused model's tensors under the names of checkpoints written before fusion
    became a decoder-layer module (the inverse of checkpoint.RENAMED)."""
    out = {}
    for name, value in weights.items():
        layer, _, rest = name.partition(".cross_attn.")
        if rest:
            name = f"{layer}.cross_attn.attn.{rest}"
        layer, _, rest = name.partition(".fusion.")
        if rest == "query_term":
            name = f"{layer}.cross_attn.attn.score.w_q"
        elif rest:
            name = f"{layer}.cross_attn.{rest}"
        out[name] = value
    return out


@pytest.mark.parametrize("score", ["dot", "trilinear"])
def test_a_fused_checkpoint_of_the_earlier_layout_translates_the_same(tiny_run, tmp_path, score):
    payload = checkpoint.load(tiny_run / "best.pt")
    config = payload["config"]
    model_cfg = {**config["model"], "decoder": {"kind": "standard", "fusion": "bidaf"}}
    model_cfg["attention"] = {**model_cfg["attention"], "score": score}
    new = {**config, "model": model_cfg}
    model = load_model(tiny_run, torch.device("cpu")).model
    vocab = model.generator.weight.size(0)
    fused = type(model)(config_from_dict(new).model, vocab, vocab, PAD, True)
    torch.manual_seed(1)
    with torch.no_grad():
        for p in fused.parameters():
            p.add_(torch.randn_like(p) * 0.1)  # w_q and everything else away from its start
    stored = {k: v for k, v in fused.state_dict().items()}
    old_model = {**model_cfg, "decoder": {"kind": "standard"}}
    old_model["attention"] = {**model_cfg["attention"], "fusion": "bidaf"}
    old = {**payload, "config": {**config, "model": old_model}, "model": old_names(stored)}
    assert any(".cross_attn.attn." in k for k in old["model"])
    checkpoint.save(tmp_path / "old.pt", {k: v for k, v in old.items() if k != "format"})
    loaded = load_model(tmp_path / "old.pt", torch.device("cpu")).model
    src, tgt = random_batch([5, 7]), random_batch([4, 6])
    torch.testing.assert_close(loaded.eval()(src, tgt), fused.eval()(src, tgt))


def test_a_recipe_naming_attention_fusion_is_refused_with_the_new_key(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "run_dir: x\ndata: {dir: ., src_lang: a, tgt_lang: b}\n"
        "model: {attention: {kind: global, fusion: bidaf}}\n"
    )
    with pytest.raises(NmtError, match=r"model\.attention\.fusion: .* set model\.decoder\.fusion"):
        load_recipe(recipe)


def test_incremental_state_is_kept_per_sub_module():
    """Each decoder layer's cache holds its self-attention's keys and values and its
    fusion's history apart, each under the sub-module's name."""
    model = tiny_model(model=FUSED).eval()
    memory, src_mask = model.encode(random_batch([5, 3]))
    state = model.decoder_state(memory, src_mask, incremental=True)
    model.decode(random_batch([1, 1]), state)
    for cache in state.caches:
        assert set(cache) == {"self_attn", "fusion"}
        assert set(cache["self_attn"]) == {"key", "value"} and set(cache["fusion"]) == {"m", "h"}


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
    stored["model"]["attention"]["fusion"] = stored["model"]["decoder"].pop("fusion")
    checkpoint.save(last, {k: v for k, v in payload.items() if k != "format"})
    longer = tiny_config(train={"max_steps": 4, "valid_every": 2})
    train(longer, device="cpu", resume=True)
    assert checkpoint.load(last)["state"]["step"] == 4
