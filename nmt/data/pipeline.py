"""From a recipe's ``data`` section to vocabularies and encoded, filtered pairs."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nmt.checkpoint import atomic_write, write_text
from nmt.data.batching import ParallelData
from nmt.data.config import DataConfig
from nmt.data.corpus import read_parallel, split_path
from nmt.data.vocab import Vocab
from nmt.errors import NmtError


@dataclass(frozen=True)
class Vocabs:
    src: Vocab
    tgt: Vocab

    @property
    def joint(self) -> bool:
        return self.src is self.tgt


def checkpoint_vocabs(ckpt: dict[str, Any], path: str | Path) -> Vocabs:
    """The vocabularies a checkpoint's model was trained with."""
    v = ckpt["vocab"]
    src = Vocab(v["src"], f"{path} (source vocabulary)")
    return Vocabs(src, src if v["joint"] else Vocab(v["tgt"], f"{path} (target vocabulary)"))


def split_files(cfg: DataConfig, split: str) -> tuple[Path, Path]:
    """The (source, target) files of ``split``; a missing one is an error naming it."""
    if not Path(cfg.dir).is_dir():
        raise NmtError(f"data.dir: {cfg.dir}: no such directory")
    return split_path(cfg.dir, split, cfg.src_lang), split_path(cfg.dir, split, cfg.tgt_lang)


def check_files(cfg: DataConfig) -> None:
    """Fail before any work if a training, dev or test file is missing."""
    for split in (cfg.train, cfg.dev, *cfg.test):
        split_files(cfg, split)


VOCAB_STAMP = "spm.json"  # the settings and training files that made the stored models


def vocab_stamp(cfg: DataConfig) -> str:
    """What a stored vocabulary was made from: the vocabulary settings and the
    training files' paths and sizes."""
    files = {str(p): p.stat().st_size for p in split_files(cfg, cfg.train)}
    return json.dumps({"vocab": dataclasses.asdict(cfg.vocab), "train": files}, sort_keys=True)


def build_vocabs(
    cfg: DataConfig, src: list[str], tgt: list[str], run_dir: Path, log: Callable[[str], None]
) -> Vocabs:
    """Load the recipe's SentencePiece models, reuse those stored in the run directory
    when the same settings and files made them (a run that failed early, the other
    ranks of a data-parallel run), or train and store new ones."""
    stamp_path, stamp = run_dir / VOCAB_STAMP, vocab_stamp(cfg)
    try:
        reuse = stamp_path.read_text(encoding="utf-8") == stamp
    except (OSError, UnicodeDecodeError):
        reuse = False
    vocabs = stored_or_trained(cfg, src, tgt, run_dir, reuse, log)
    write_text(stamp_path, stamp)
    return vocabs


def stored_or_trained(
    cfg: DataConfig,
    src: list[str],
    tgt: list[str],
    run_dir: Path,
    reuse: bool,
    log: Callable[[str], None],
) -> Vocabs:
    """The given models, else the stored ones if ``reuse``, else newly trained; each
    written to the run directory."""
    v = cfg.vocab
    if v.joint:
        stored = run_dir / "spm.model"
        if v.model is not None:
            joint = Vocab.load(v.model)
        elif reuse and stored.is_file():
            joint = Vocab.load(stored)
        else:
            log(f"training a joint SentencePiece {v.type} model ({v.size} pieces)")
            joint = Vocab.train(src + tgt, v.size, v.type)
        atomic_write(stored, lambda f: f.write(joint.model))
        return Vocabs(joint, joint)
    vocabs = []
    for side, lines, given in (("src", src, v.src_model), ("tgt", tgt, v.tgt_model)):
        stored = run_dir / f"spm.{side}.model"
        if given is not None:
            vocab = Vocab.load(given)
        elif reuse and stored.is_file():
            vocab = Vocab.load(stored)
        else:
            log(f"training the {side} SentencePiece {v.type} model ({v.size} pieces)")
            vocab = Vocab.train(lines, v.size, v.type)
        atomic_write(stored, lambda f, vocab=vocab: f.write(vocab.model))
        vocabs.append(vocab)
    return Vocabs(*vocabs)


def encode_pairs(
    src: list[str],
    tgt: list[str],
    vocabs: Vocabs,
    max_len: int,
    what: str,
    log: Callable[[str], None],
) -> ParallelData:
    """Encode pairs, dropping empty ones and those longer than ``max_len`` pieces."""
    src_ids, tgt_ids = vocabs.src.encode(src), vocabs.tgt.encode(tgt)
    keep = [i for i, (s, t) in enumerate(zip(src_ids, tgt_ids)) if s and t]
    empty = len(src_ids) - len(keep)
    short = [i for i in keep if len(src_ids[i]) <= max_len and len(tgt_ids[i]) <= max_len]
    long = len(keep) - len(short)
    if empty or long:
        log(
            f"{what}: dropped {empty} empty and {long} over-long (> {max_len} pieces) pairs "
            f"of {len(src_ids)}"
        )
    return ParallelData([src_ids[i] for i in short], [tgt_ids[i] for i in short])


def load_training(
    cfg: DataConfig, run_dir: Path, log: Callable[[str], None], vocabs: Vocabs | None = None
) -> tuple[Vocabs, ParallelData]:
    """Read and check the training split, get vocabularies (``vocabs`` if given),
    encode and filter."""
    src_path, tgt_path = split_files(cfg, cfg.train)
    src, tgt = read_parallel(src_path, tgt_path)
    if not any(s.strip() and t.strip() for s, t in zip(src, tgt)):
        raise NmtError(f"{src_path}: empty training set (no pair with text on both sides)")
    if vocabs is None:
        vocabs = build_vocabs(cfg, src, tgt, run_dir, log)
    data = encode_pairs(src, tgt, vocabs, cfg.max_len, "train", log)
    if len(data) == 0:
        raise NmtError(
            f"{src_path}: empty training set after dropping pairs longer than "
            f"data.max_len={cfg.max_len}"
        )
    return vocabs, data


def load_split(cfg: DataConfig, split: str) -> tuple[list[str], list[str]]:
    """Raw (source, reference) lines of a dev or test split."""
    return read_parallel(*split_files(cfg, split))
