"""From a recipe's ``data`` section to vocabularies and encoded, filtered pairs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nmt.data import cache
from nmt.data.batching import ParallelData, keep_pairs
from nmt.data.corpus import read_documents, read_parallel, split_path
from nmt.data.splits import base_split, derive, needs_documents
from nmt.data.vocab import Vocab, clip_lines
from nmt.errors import NmtError
from nmt.io.files import atomic_write
from nmt.setup.data import DataConfig


@dataclass(frozen=True)
class Vocabs:
    src: Vocab
    tgt: Vocab

    @property
    def joint(self) -> bool:
        return self.src is self.tgt

    def separated(self, on: bool = True) -> Vocabs:
        """These vocabularies, each with a separator where ``on`` (a sentence-group
        model's: nmt.data.vocab.Vocab)."""
        if not on:
            return self
        src = self.src.separated()
        return Vocabs(src, src if self.joint else self.tgt.separated())


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
    """Fail before any work if a training file is missing, or a dev or test split is
    missing or damaged (unreadable, uneven or empty): training would otherwise find
    out only when it validates or, for a test split, when it ends."""
    split_files(cfg, cfg.train)
    for split in (cfg.dev, *cfg.test):
        load_split(cfg, split)


def recipe_vocabs(cfg: DataConfig, files: tuple[Path, Path], log: Callable[[str], None]) -> Vocabs:
    """The recipe's SentencePiece models: those it gives, else the ones its settings
    train on the training files (trained once, kept in the data cache)."""
    v = cfg.vocab
    if v.joint and v.model is not None:
        joint = Vocab.load(v.model)
        return Vocabs(joint, joint)
    if v.src_model is not None:
        return Vocabs(Vocab.load(v.src_model), Vocab.load(v.tgt_model))
    models = [Vocab(data, str(path)) for path, data in cache.vocab_models(cfg, files, log).items()]
    return Vocabs(models[0], models[-1])  # one joint model, or the source's and the target's


def store_vocabs(vocabs: Vocabs, run_dir: Path) -> None:
    """Copy the models into the run directory, for tools that want the files."""
    names = (
        {"spm.model": vocabs.src}
        if vocabs.joint
        else {
            "spm.src.model": vocabs.src,
            "spm.tgt.model": vocabs.tgt,
        }
    )
    for name, vocab in names.items():
        atomic_write(run_dir / name, lambda f, vocab=vocab: f.write(vocab.model))


def encode_pairs(
    src: list[str],
    tgt: list[str],
    vocabs: Vocabs,
    max_len: int,
    what: str,
    log: Callable[[str], None],
) -> ParallelData:
    """Encode pairs, dropping empty ones and those longer than ``max_len`` pieces."""
    src_ids, tgt_ids = (
        vocabs.src.encode(clip_lines(src, max_len)),
        vocabs.tgt.encode(clip_lines(tgt, max_len)),
    )
    short, empty, long = keep_pairs(src_ids, tgt_ids, max_len)
    report_dropped(log, what, empty, long, max_len, len(src_ids))
    return ParallelData.from_lists([src_ids[i] for i in short], [tgt_ids[i] for i in short])


def report_dropped(
    log: Callable[[str], None], what: str, empty: int, long: int, max_len: int, lines: int
) -> None:
    if empty or long:
        log(
            f"{what}: dropped {empty} empty and {long} over-long (> {max_len} pieces) pairs "
            f"of {lines}"
        )


def prepare(cfg: DataConfig, log: Callable[[str], None]) -> dict[str, Any]:
    """Put the recipe's vocabulary and training split in the data cache (``nmt data
    prepare``); returns the entry's meta.json with its path and size."""
    files = split_files(cfg, cfg.train)
    vocabs = recipe_vocabs(cfg, files, log)
    return cache.prepared(cfg, files, vocabs.src, vocabs.tgt, log)[1]


def load_training(
    cfg: DataConfig, run_dir: Path, log: Callable[[str], None], vocabs: Vocabs | None = None
) -> tuple[Vocabs, ParallelData]:
    """Vocabularies (``vocabs`` if given) and the training pairs, encoded and
    filtered, memory-mapped from the data cache (prepared there first if no run
    has prepared them: :mod:`nmt.data.cache`)."""
    files = split_files(cfg, cfg.train)
    if vocabs is None:
        vocabs = recipe_vocabs(cfg, files, log)
    store_vocabs(vocabs, run_dir)
    data, meta = cache.prepared(cfg, files, vocabs.src, vocabs.tgt, log)
    report_dropped(log, "train", meta["empty"], meta["long"], cfg.max_len, meta["lines"])
    if cfg.train_max_words is not None:
        log(
            f"train: held out {meta['held_out']:,} pairs over {cfg.train_max_words} source "
            f"words (data.train_max_words; test on them as split "
            f"'{cfg.train}>{cfg.train_max_words}')"
        )
    if meta["pairs"] == 0:
        why = (
            "no pair with text on both sides"
            if meta["empty"] == meta["lines"]
            else f"after dropping pairs longer than data.max_len={cfg.max_len}"
        )
        if meta.get("held_out"):
            why += f" and {meta['held_out']:,} over data.train_max_words"
        raise NmtError(f"{files[0]}: empty training set ({why})")
    return vocabs, data


def load_split(cfg: DataConfig, split: str) -> tuple[list[str], list[str]]:
    """Raw (source, reference) lines of a dev or test split, or of a split made from
    one (``NAME*K``, ``NAME>N``: nmt.data.splits); an empty one is an error (there is
    nothing to score)."""
    base = base_split(split)
    try:
        src_path, tgt_path = split_files(cfg, base)
    except NmtError as e:
        if base_split(base) == base:
            raise
        # NAME*2*3 reads files named NAME*2: say why they were looked for
        raise NmtError(
            f"split {split!r}: a name carries one suffix (NAME*K, NAME~K or NAME>N), so "
            f"its files are {base}'s: {e}"
        ) from None
    lines = read_parallel(src_path, tgt_path)
    if not lines[0]:
        raise NmtError(f"{src_path}: empty file; split {split!r} needs at least one line")
    docs = read_documents(Path(cfg.dir), base, len(lines[0])) if needs_documents(split) else None
    src, refs = derive(split, *lines, docs)
    if not src:
        raise NmtError(f"split {split!r}: no pair (of the {len(lines[0]):,} in {src_path})")
    return src, refs
