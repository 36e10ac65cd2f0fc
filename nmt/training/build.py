"""From a recipe to what a trainer needs: the data, its vocabularies, and the model."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from nmt.data.batching import ParallelData
from nmt.data.pipeline import Vocabs, checkpoint_vocabs, encode_pairs, load_split, load_training
from nmt.data.vocab import PAD
from nmt.distributed import Distributed
from nmt.model import Transformer
from nmt.model.config import ModelConfig
from nmt.training.rundir import recipe_changes

if TYPE_CHECKING:
    from nmt.recipe import RunConfig


@dataclass(frozen=True)
class TrainingData:
    """Encoded training and dev pairs, and the raw dev text that validation BLEU reads."""

    vocabs: Vocabs
    train: ParallelData
    dev: ParallelData
    dev_src: list[str]
    dev_refs: list[str]


def load_data(
    cfg: RunConfig,
    log: Callable[[str], None],
    vocabs: Vocabs | None = None,
    dist: Distributed = Distributed(),
) -> TrainingData:
    """Read, encode and filter the training and dev splits. ``vocabs``: those to use
    (a resumed run's); else the recipe's, trained and stored in the run directory by
    rank 0 while the other ranks wait."""
    if not dist.main:
        dist.barrier()  # rank 0 trains and stores the vocabulary first
    vocabs, train = load_training(cfg.data, Path(cfg.run_dir), log, vocabs)
    if dist.main:
        dist.barrier()
    dev_src, dev_refs = load_split(cfg.data, cfg.data.dev)
    dev = encode_pairs(dev_src, dev_refs, vocabs, cfg.model.max_positions - 1, "dev", log)
    return TrainingData(vocabs, train, dev, dev_src, dev_refs)


def resolve_from_data(cfg: RunConfig, data: ParallelData, log: Callable[[str], None]) -> RunConfig:
    """Fill the recipe values that the variant measures on the training data
    (``AttentionConfig.from_data``: local_m's length ratio)."""
    attention, measured = cfg.model.attention.from_data(data.lengths)
    if measured is not None:
        log(measured)
    model = dataclasses.replace(cfg.model, attention=attention)
    return dataclasses.replace(cfg, model=model)


def build_model(cfg: ModelConfig, vocabs: Vocabs) -> Transformer:
    return Transformer(cfg, len(vocabs.src), len(vocabs.tgt), PAD, share_embeddings=vocabs.joint)


def build(
    cfg: RunConfig,
    log: Callable[[str], None],
    resumed: tuple[Path, dict[str, Any]] | None = None,
    dist: Distributed = Distributed(),
) -> tuple[Transformer, TrainingData, RunConfig]:
    """The model (initialised from ``train.seed``), its data, and the recipe with its
    data-measured values filled in: ``Trainer(*build(cfg, log))`` trains it.

    ``resumed``: the checkpoint (path, contents) a resume continues, whose
    vocabularies are used and whose recipe the new one may change only in run-time
    keys (checked before the model is built)."""
    vocabs = checkpoint_vocabs(resumed[1], resumed[0]) if resumed is not None else None
    data = load_data(cfg, log, vocabs, dist)
    cfg = resolve_from_data(cfg, data.train, log)
    if resumed is not None:
        for change in recipe_changes(resumed[1]["config"], cfg.to_dict(), resumed[0]):
            log(f"resume: {change}")
    torch.manual_seed(cfg.train.seed)
    return build_model(cfg.model, data.vocabs), data, cfg
