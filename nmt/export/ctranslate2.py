"""``nmt export``: a trained model in a serving engine's format.

CTranslate2 (Klein et al. 2020; the ``ctranslate2`` extra) runs Transformer
encoder-decoders with fused kernels and int8/float16 weights. It expresses the
standard architecture only: global dot-product cross-attention, the standard
decoder and the transformer encoder block. Other variants are refused, naming the
key that makes the model inexpressible.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from nmt import install_hint
from nmt.data.vocab import BOS, PAD
from nmt.errors import NmtError
from nmt.io.files import remove_dead_temps, write_text
from nmt.model.load import Loaded, load_model
from nmt.model.seq2seq import Transformer
from nmt.setup.attention import ATTENTION
from nmt.setup.model import DECODERS, ENCODER_BLOCKS

QUANTIZATIONS = ("float32", "int8", "int16", "float16", "bfloat16", "int8_float16")
LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default, which every norm here keeps


def inexpressible(loaded: Loaded, engine: str = "CTranslate2") -> str | None:
    """Why ``engine``, which runs the standard Transformer only, cannot run this
    model (the recipe key and value), or None."""
    m = loaded.cfg.model
    settings = {
        "model.attention.kind": (m.attention.kind, "global"),
        "model.attention.score": (m.attention.score, "dot"),
        "model.positions.kind": (m.positions.kind, "sinusoidal"),
        "model.positions.cross_alibi": (m.positions.cross_alibi, False),
        "model.decoder.fusion": (m.decoder.fusion, "none"),
        "model.decoder.kind": (m.decoder.kind, "standard"),
        "model.decoder.group_layers": (m.decoder.group_layers, 0),
        "model.encoder.block": (m.encoder.block, "transformer"),
    }
    for key, (value, needed) in settings.items():
        if value != needed:
            return f"{key} is {value}; {engine} runs {key.rsplit('.', 1)[1]} {needed} only"
    return None


# Recipe keys that hold a path of the training machine: an export keeps only each
# one's last part (nothing publishable records where a run was trained).
PATH_KEYS = (
    ("run_dir",),
    ("data", "dir"),
    ("data", "cache_dir"),
    ("data", "vocab", "model"),
    ("data", "vocab", "src_model"),
    ("data", "vocab", "tgt_model"),
    ("train", "tensorboard_dir"),
    ("train", "mlflow_uri"),
    ("train", "wandb_dir"),
    ("train", "alignment", "file"),
)


def published_recipe(recipe: dict[str, Any]) -> dict[str, Any]:
    """The recipe as an export keeps it: of every path its last part, and no
    ``plugins`` (their paths are this machine's, and an export runs no plug-in)."""
    out = copy.deepcopy({k: v for k, v in recipe.items() if k != "plugins"})
    for keys in PATH_KEYS:
        holder = out
        for key in keys[:-1]:
            holder = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and isinstance(holder.get(keys[-1]), str):
            holder[keys[-1]] = Path(holder[keys[-1]]).name
    return out


def published_name(checkpoint: Path) -> str:
    """A checkpoint as an export names it: its run directory's name and its own."""
    checkpoint = checkpoint.resolve()
    return checkpoint.name if checkpoint.is_dir() else f"{checkpoint.parent.name}/{checkpoint.name}"


def plugin_code(loaded: Loaded) -> str | None:
    """The model's parts (attention kind, encoder block, decoder) that a plug-in
    outside nmt defines, as one phrase, or None when nmt's own code builds it."""
    m = loaded.cfg.model
    parts = {
        "model.attention.kind": (ATTENTION, m.attention.kind),
        "model.encoder.block": (ENCODER_BLOCKS, m.encoder.block),
        "model.decoder.kind": (DECODERS, m.decoder.kind),
    }
    outside = [
        f"{key} {name} (module {module})"
        for key, (registry, name) in parts.items()
        if not (module := registry.get(name).__module__).startswith("nmt.")
    ]
    return "; ".join(outside) or None


def refuse_occupied(out_dir: Path) -> None:
    """An export never writes into a file or a directory that holds anything."""
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise NmtError(f"{out_dir}: exists and is not an empty directory; choose another -o")


def write_directory(out_dir: Path, fill: Callable[[Path], None]) -> None:
    """``fill`` a directory built beside ``out_dir``, then rename it into place: a
    failed export leaves nothing, and what a killed one left is removed first."""
    remove_dead_temps(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.{os.getpid()}.tmp")
    try:
        tmp.mkdir(parents=True)
        fill(tmp)
        if out_dir.exists():
            out_dir.rmdir()
        tmp.rename(out_dir)
    except OSError as e:
        raise NmtError(f"{out_dir}: cannot write the export ({e.strerror or e})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _array(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def _linear(spec: Any, layer: nn.Linear) -> None:
    spec.weight = _array(layer.weight)
    if layer.bias is not None:
        spec.bias = _array(layer.bias)


def _fused(spec: Any, layers: list[nn.Linear]) -> None:
    """Several projections of one input as one (CTranslate2's fused key/value)."""
    spec.weight = _array(torch.cat([layer.weight for layer in layers]))
    spec.bias = _array(torch.cat([layer.bias for layer in layers]))


def _norm(spec: Any, norm: nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _ffn(spec: Any, layer: nn.Module) -> None:
    _norm(spec.layer_norm, layer.ffn_norm)
    _linear(spec.linear_0, layer.ffn[0])  # FeedForward: Linear, ReLU, Dropout, Linear
    _linear(spec.linear_1, layer.ffn[3])


def _inputs(spec: Any, embedding: nn.Module) -> None:
    """Token embeddings (scaled by sqrt(D), as here) and our sinusoid table itself,
    so that positions match whatever layout CTranslate2 would compute."""
    tables = spec.embeddings if isinstance(spec.embeddings, list) else [spec.embeddings]
    tables[0].weight = _array(embedding.tokens.weight)
    spec.scale_embeddings = True
    spec.position_encodings.encodings = _array(embedding.positions.table)


def ctranslate2_spec(model: Transformer, vocabs: Any) -> Any:
    """The CTranslate2 ``TransformerSpec`` holding ``model``'s weights and vocabularies."""
    from ctranslate2.specs import TransformerSpec, common_spec

    cfg = model.cfg
    spec = TransformerSpec.from_config(
        (cfg.encoder_layers, cfg.decoder_layers),
        cfg.heads,
        pre_norm=True,
        activation=common_spec.Activation.RELU,
    )
    spec.config.layer_norm_epsilon = LAYER_NORM_EPS
    spec.config.add_source_eos = True  # the source ends with </s>, as in training
    enc, dec = spec.encoder, spec.decoder
    _inputs(enc, model.src_embed)
    _norm(enc.layer_norm, model.encoder_norm)
    for layer_spec, layer in zip(enc.layer, model.encoder):
        _linear(layer_spec.self_attention.linear[0], layer.self_attn.qkv)
        _linear(layer_spec.self_attention.linear[1], layer.self_attn.out_proj)
        _norm(layer_spec.self_attention.layer_norm, layer.self_norm)
        _ffn(layer_spec.ffn, layer)
    _inputs(dec, model.tgt_embed)
    _norm(dec.layer_norm, model.decoder_norm)
    _linear(dec.projection, model.output)
    for layer_spec, layer in zip(dec.layer, model.decoder):
        _linear(layer_spec.self_attention.linear[0], layer.self_attn.qkv)
        _linear(layer_spec.self_attention.linear[1], layer.self_attn.out_proj)
        _norm(layer_spec.self_attention.layer_norm, layer.self_norm)
        cross = layer.cross_attn
        _linear(layer_spec.attention.linear[0], cross.q_proj)
        _fused(layer_spec.attention.linear[1], [cross.k_proj, cross.v_proj])
        _linear(layer_spec.attention.linear[2], cross.out_proj)
        _norm(layer_spec.attention.layer_norm, layer.cross_norm)
        _ffn(layer_spec.ffn, layer)
    spec.register_source_vocabulary([vocabs.src.id_to_piece(i) for i in range(len(vocabs.src))])
    spec.register_target_vocabulary([vocabs.tgt.id_to_piece(i) for i in range(len(vocabs.tgt))])
    return spec


def length_limit(loaded: Loaded, formula: str) -> dict[str, Any]:
    """nmt's output limit, ``min(int(a·S + b), cap)`` tokens (the forced ``</s>``
    included) for a source of S ids (``</s>`` included), for engines that take one
    limit per call: its figures and ``formula``, how the engine's own limit is
    computed from them (CTranslate2 counts neither ``</s>``)."""
    d = loaded.cfg.decode
    return {
        "a": d.max_len_a,
        "b": d.max_len_b,
        "cap": loaded.cfg.model.max_positions - 1,
        "formula": formula,
    }


def export_ctranslate2(checkpoint: Path, out_dir: Path, quantization: str = "float32") -> Path:
    """Write ``out_dir``: the CTranslate2 model (``model.bin``, vocabularies,
    ``config.json``), the SentencePiece models ``source.spm`` and ``target.spm``, and
    ``nmt-export.json`` (what was exported, how to run it). Built beside
    ``out_dir`` and renamed into place: a failed export leaves nothing."""
    if quantization not in QUANTIZATIONS:
        raise NmtError(f"--quantization {quantization}: expected one of {', '.join(QUANTIZATIONS)}")
    try:
        import ctranslate2
    except ImportError:
        raise NmtError(
            f"CTranslate2 export needs the ctranslate2 extra: {install_hint('ctranslate2')}"
        ) from None
    refuse_occupied(out_dir)
    loaded = load_model(checkpoint, torch.device("cpu"))
    if (why := inexpressible(loaded)) is not None:
        raise NmtError(f"{checkpoint}: not exported: {why}")
    spec = ctranslate2_spec(loaded.model, loaded.vocabs)
    spec.validate()
    spec.optimize(quantization=None if quantization == "float32" else quantization)

    def fill(tmp: Path) -> None:
        spec.save(str(tmp))
        (tmp / "source.spm").write_bytes(loaded.vocabs.src.model)
        (tmp / "target.spm").write_bytes(loaded.vocabs.tgt.model)
        manifest = {
            "format": "ctranslate2",
            "ctranslate2_version": ctranslate2.__version__,
            "checkpoint": published_name(checkpoint),
            "quantization": quantization,
            "source_vocabulary": "source.spm",
            "target_vocabulary": "target.spm",
            "decode": loaded.cfg.to_dict()["decode"],
            "max_decoding_length": length_limit(
                loaded, "min(int(a * (n + 1) + b), cap) - 1 for n source pieces"
            ),
            # nmt's search never emits PAD or BOS; CTranslate2's must be told to
            "suppress_sequences": [[loaded.vocabs.tgt.id_to_piece(i)] for i in (PAD, BOS)],
            "usage": "tokens = SentencePiece(source.spm).encode(line, out_type=str); "
            "ctranslate2.Translator(DIR).translate_batch([tokens], beam_size=..., "
            "suppress_sequences=SUPPRESS_SEQUENCES, max_decoding_length="
            "min(int(a * (len(tokens) + 1) + b), cap) - 1); "
            "SentencePiece(target.spm).decode(hypothesis)",
        }
        write_text(tmp / "nmt-export.json", json.dumps(manifest, indent=2) + "\n")

    write_directory(out_dir, fill)
    return out_dir
