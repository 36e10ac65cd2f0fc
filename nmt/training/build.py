"""From a recipe to what a trainer needs: the data, its vocabularies, and the model."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from nmt.data.batching import ParallelData
from nmt.data.corpus import count_lines
from nmt.data.gold_alignments import GoldAlignments
from nmt.data.pipeline import (
    Vocabs,
    checkpoint_vocabs,
    encode_pairs,
    load_split,
    load_training,
    split_files,
)
from nmt.data.splits import shorter
from nmt.data.vocab import PAD
from nmt.errors import ConfigError, NmtError
from nmt.io.rundir import recipe_changes
from nmt.model.seq2seq import Transformer
from nmt.setup.model import ModelConfig
from nmt.setup.recipe import config_from_dict
from nmt.training.distributed import Distributed

if TYPE_CHECKING:
    from nmt.setup.recipe import RunConfig


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
    vocabs = vocabs.separated(cfg.model.decoder.group_layers > 0)  # the model's tables
    if dist.main:
        dist.barrier()
    if (guide := cfg.train.alignment) is not None:
        path = Path(guide.file or Path(cfg.data.dir) / f"{cfg.data.train}.align")
        total = count_lines(split_files(cfg.data, cfg.data.train)[0])
        train.alignments = GoldAlignments.read(path, train.lines, total, vocabs.src, vocabs.tgt)
        log(f"guided alignment: gold links of {len(train)} training pairs from {path}")
    dev_src, dev_refs = load_split(cfg.data, cfg.data.dev)
    if (n := cfg.data.train_max_words) is not None:  # the dev set is as short as training
        all_dev = len(dev_src)
        dev_src, dev_refs = shorter(dev_src, dev_refs, n)
        if not dev_src:
            raise NmtError(
                f"data.train_max_words {n}: holds out every one of the {all_dev:,} dev pairs "
                f"of {split_files(cfg.data, cfg.data.dev)[0]} (each has more source words); "
                "raise it, or validate on a split of shorter pairs (data.dev)"
            )
    dev = encode_pairs(dev_src, dev_refs, vocabs, cfg.model.max_positions - 1, "dev", log)
    if len(dev) == 0:
        raise NmtError(
            f"{split_files(cfg.data, cfg.data.dev)[0]}: no dev pair to validate on (each is "
            f"empty on a side or longer than model.max_positions - 1 = "
            f"{cfg.model.max_positions - 1} pieces)"
        )
    return TrainingData(vocabs, train, dev, dev_src, dev_refs)


def resolve_from_data(cfg: RunConfig, data: ParallelData, log: Callable[[str], None]) -> RunConfig:
    """Fill the recipe values measured on the training data: the length ratio of
    local_m's centre (``AttentionConfig.from_data``), of cross-attention ALiBi's
    diagonal (``PositionsConfig.from_data``) and of translate's length check
    (``DecodeConfig.from_data``)."""
    attention, measured = cfg.model.attention.from_data(data.lengths)
    positions, located = cfg.model.positions.from_data(data.lengths)
    decode, predicted = cfg.decode.from_data(data.lengths)
    for line in (measured, located, predicted):
        if line is not None:
            log(line)
    model = dataclasses.replace(cfg.model, attention=attention, positions=positions)
    return dataclasses.replace(cfg, model=model, decode=decode)


def build_model(cfg: ModelConfig, vocabs: Vocabs) -> Transformer:
    return Transformer(cfg, len(vocabs.src), len(vocabs.tgt), PAD, share_embeddings=vocabs.joint)


def available_memory(device: torch.device) -> int | None:
    """Free bytes on ``device`` (the GPU's, or the system's MemAvailable); None if unknown."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            fields = dict(line.split(":", 1) for line in f)
        return int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None


def check_fits(cfg: ModelConfig, vocabs: Vocabs, device: torch.device) -> None:
    """Refuse, before allocating anything, a model whose weights, gradients and Adam
    moments alone (4 fp32 copies) exceed the device's free memory: counted on
    PyTorch's meta device, which builds the modules without storage."""
    with torch.device("meta"):
        params = sum(p.numel() for p in build_model(cfg, vocabs).parameters())
    need, free = 16 * params, available_memory(device)
    if free is not None and need > free:
        raise NmtError(
            f"model: {params:,} parameters need {need / 2**30:,.1f} GiB to train (weights, "
            f"gradients, Adam moments) and {device} has {free / 2**30:,.1f} GiB free; lower "
            "model.d_model, model.ffn or the layer counts"
        )


def stored_recipe(path: Path, ckpt: dict[str, Any]) -> dict[str, Any]:
    """The recipe a checkpoint was trained with, as a whole config: keys added to
    nmt since then read at their defaults, so that they are no change."""
    try:
        return config_from_dict(ckpt["config"], str(path)).to_dict()
    except ConfigError as e:
        raise NmtError(f"{path}: damaged, cannot resume from it ({e})") from None


def build(
    cfg: RunConfig,
    log: Callable[[str], None],
    resumed: tuple[Path, dict[str, Any]] | None = None,
    dist: Distributed = Distributed(),
    device: torch.device = torch.device("cpu"),
) -> tuple[Transformer, TrainingData, RunConfig]:
    """The model (initialised from ``train.seed``), its data, and the recipe with its
    data-measured values filled in: ``Trainer(*build(cfg, log))`` trains it.

    ``resumed``: the checkpoint (path, contents) a resume continues, whose
    vocabularies are used and whose recipe the new one may change only in run-time
    keys (checked before the model is built). A model that cannot fit ``device`` is
    refused before it is built."""
    vocabs = checkpoint_vocabs(resumed[1], resumed[0]) if resumed is not None else None
    data = load_data(cfg, log, vocabs, dist)
    cfg = resolve_from_data(cfg, data.train, log)
    if resumed is not None:
        stored = stored_recipe(*resumed)
        for change in recipe_changes(stored, cfg.to_dict(), resumed[0]):
            log(f"resume: {change}")
    check_fits(cfg.model, data.vocabs, device)
    if cfg.decode.beam > len(data.vocabs.tgt):
        raise NmtError(
            f"decode.beam: {cfg.decode.beam} is more than the {len(data.vocabs.tgt)} pieces "
            "of the target vocabulary"
        )
    torch.manual_seed(cfg.train.seed)
    return build_model(cfg.model, data.vocabs), data, cfg
