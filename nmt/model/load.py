"""Rebuild a trained model and its vocabularies from a checkpoint."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nmt.data.pipeline import Vocabs, checkpoint_vocabs
from nmt.data.vocab import PAD
from nmt.errors import ConfigError, NmtError, brief
from nmt.io import checkpoint
from nmt.model.seq2seq import Transformer
from nmt.setup.recipe import RunConfig, config_from_dict


@dataclass(frozen=True)
class Loaded:
    cfg: RunConfig
    model: Transformer
    vocabs: Vocabs


def mismatch(model: nn.Module, state: dict[str, Any]) -> str | None:
    """A short account of how a state dict differs from the model's parameters."""
    want = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in state.items() if isinstance(v, torch.Tensor)}
    missing, unexpected = sorted(want.keys() - got.keys()), sorted(got.keys() - want.keys())
    shaped = sorted(k for k in want.keys() & got.keys() if want[k] != got[k])
    parts = [
        f"{len(keys)} {what} (e.g. {keys[0]}{detail(keys[0])})"
        for keys, what, detail in (
            (missing, "missing", lambda k: ""),
            (unexpected, "unexpected", lambda k: ""),
            (shaped, "of another shape", lambda k: f": {got[k]} for {want[k]}"),
        )
        if keys
    ]
    return ", ".join(parts) or None


def load_model(path: str | Path, device: torch.device) -> Loaded:
    """A checkpoint file, or a run directory (its ``best.pt``), ready for inference."""
    return model_from_payload(checkpoint.load(path), path, device)


def model_from_payload(ckpt: dict[str, Any], path: str | Path, device: torch.device) -> Loaded:
    """A loaded (or averaged) checkpoint's model, ready for inference; errors name
    ``path``."""
    checkpoint.check_entries(ckpt, path, {"config": dict, "vocab": dict, "model": dict})
    try:
        cfg = config_from_dict(ckpt["config"], str(path))
        vocabs = checkpoint_vocabs(ckpt, path).separated(cfg.model.decoder.group_layers > 0)
        model = Transformer(cfg.model, len(vocabs.src), len(vocabs.tgt), PAD, vocabs.joint)
        if (differs := mismatch(model, ckpt["model"])) is not None:
            raise NmtError(f"{path}: the weights do not fit the checkpoint's recipe: {differs}")
        checkpoint.check_dtypes(ckpt["model"], model.state_dict(), path)
        model.load_state_dict(ckpt["model"])
    except (KeyError, TypeError, RuntimeError, ConfigError) as e:
        raise NmtError(f"{path}: checkpoint does not match this nmt version ({brief(e)})") from None
    checkpoint.check_finite(model.state_dict(), path)
    return Loaded(cfg, model.to(device).eval(), vocabs)
