"""Rebuild a trained model and its vocabularies from a checkpoint."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from nmt import checkpoint
from nmt.data.pipeline import Vocabs
from nmt.data.vocab import PAD, Vocab
from nmt.errors import ConfigError, NmtError
from nmt.model.seq2seq import Transformer
from nmt.recipe import RunConfig, config_from_dict


@dataclass(frozen=True)
class Loaded:
    cfg: RunConfig
    model: Transformer
    vocabs: Vocabs


def load_model(path: str | Path, device: torch.device) -> Loaded:
    """A checkpoint file, or a run directory (its ``best.pt``), ready for inference."""
    ckpt = checkpoint.load(path)
    try:
        cfg = config_from_dict(ckpt["config"])
        v = ckpt["vocab"]
        src = Vocab(v["src"], f"{path} (source vocabulary)")
        vocabs = Vocabs(src, src) if v["joint"] else Vocabs(src, Vocab(v["tgt"], str(path)))
        model = Transformer(cfg.model, len(vocabs.src), len(vocabs.tgt), PAD, vocabs.joint)
        model.load_state_dict(ckpt["model"])
    except (KeyError, TypeError, RuntimeError, ConfigError) as e:
        raise NmtError(f"{path}: checkpoint does not match this nmt version ({e})") from None
    return Loaded(cfg, model.to(device).eval(), vocabs)
