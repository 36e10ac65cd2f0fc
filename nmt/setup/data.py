"""The recipe's ``data`` section: parallel files and the SentencePiece vocabulary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from nmt.setup.config import check


def plain_name(name: str) -> bool:
    """Whether ``name`` can name a split or a language: a file name part, neither a
    path nor hidden. Outputs are written as ``RUN/{split}.hyp``, so ``../x`` would
    write outside the run directory."""
    return bool(name) and "/" not in name and "\\" not in name and not name.startswith(".")


@dataclass(frozen=True)
class SubwordSampling:
    """Subword regularisation (Kudo 2018): each epoch the training text is segmented
    anew by sampling from the unigram model's segmentations, smoothed by ``alpha``
    (Kudo's best: 0.1 to 0.2) and drawn from the ``nbest_size`` best (-1: all; Kudo
    used 64). With a BPE vocabulary SentencePiece applies BPE-dropout instead
    (Provilkov et al. 2020): ``alpha`` is the probability of dropping a merge and
    ``nbest_size`` is unused. Dev and test text keep the deterministic segmentation."""

    alpha: float = 0.1
    nbest_size: int = 64

    def __post_init__(self) -> None:
        check(0 < self.alpha <= 1, "alpha", "must be in (0, 1]")
        check(
            self.nbest_size == -1 or 2 <= self.nbest_size <= 10_000,
            "nbest_size",
            "must be -1 (all segmentations) or in 2..10,000",
        )


@dataclass(frozen=True)
class VocabConfig:
    """SentencePiece vocabulary: trained on the training data unless ``model`` is given."""

    size: int = 8000
    joint: bool = True
    type: Literal["unigram", "bpe"] = "unigram"
    model: str | None = None  # joint: one .model file; separate: use src_model/tgt_model
    src_model: str | None = None
    tgt_model: str | None = None
    # sentences SentencePiece trains on, drawn at random (seeded) from larger corpora
    sample: int = 2_000_000
    # subword regularisation of the training text, re-drawn each epoch; null: off
    sampling: SubwordSampling | None = None

    def __post_init__(self) -> None:
        check(8 <= self.size <= 2**20, "size", "must be in 8..1,048,576")
        check(1_000 <= self.sample <= 2**30, "sample", "must be in 1,000..1,073,741,824")
        if self.joint:
            check(
                self.src_model is None and self.tgt_model is None,
                "src_model",
                "joint vocabulary: give data.vocab.model, not src_model/tgt_model",
            )
        else:
            check(
                self.model is None,
                "model",
                "separate vocabularies: give data.vocab.src_model and tgt_model",
            )
            check(
                (self.src_model is None) == (self.tgt_model is None),
                "src_model",
                "give both src_model and tgt_model, or neither",
            )

    def inert_keys(self) -> dict[str, str]:
        inert = {}
        if self.type == "bpe":
            inert["sampling.nbest_size"] = "BPE-dropout samples no n-best list (type is bpe)"
        if self.model is not None or self.src_model is not None:
            why = "a given SentencePiece model fixes the vocabulary"
            inert.update(size=why, type=why, sample=why)
        return inert


MAX_JOINED = 64  # a bound on data.join.max_k


@dataclass(frozen=True)
class JoinConfig:
    """``data.join``: train on joined pairs (Varis & Bojar 2021; Kondo et al. 2021):
    each epoch, an example starts with probability ``prob`` a group of k pairs, k
    drawn from 2..``max_k``, joined on both sides (their pieces end to end, one
    ``</s>``), as long as both sides stay within ``data.max_len``; the rest stay
    single. ``consecutive`` groups neighbouring pairs of the corpus (as the
    ``NAME*K`` test splits do), ``document`` neighbouring pairs of one document
    only (as ``NAME~K`` does; the training split's ``.doc`` ids), ``random`` any
    pairs. Every pair is in one example an epoch; the draw is a pure function of
    (train.seed, epoch). 0: off."""

    prob: float = 0.0
    max_k: int = 2
    order: Literal["consecutive", "document", "random"] = "consecutive"

    def __post_init__(self) -> None:
        check(0 <= self.prob <= 1, "prob", "must be in [0, 1] (0: no joined pairs)")
        check(2 <= self.max_k <= MAX_JOINED, "max_k", f"must be in 2..{MAX_JOINED}")

    def inert_keys(self) -> dict[str, str]:
        if self.prob > 0:
            return {}
        why = "only joined pairs use it (prob is 0)"
        return {"max_k": why, "order": why}


@dataclass(frozen=True)
class DataConfig:
    """Parallel files ``{dir}/{split}.{lang}`` (or ``.gz``), one sentence per line."""

    dir: str
    src_lang: str
    tgt_lang: str
    train: str = "train"
    dev: str = "val"
    test: tuple[str, ...] = ()
    max_len: int = 100  # subword pieces; longer training pairs are dropped
    # train short, test long: keep only the training and dev pairs of at most this
    # many source words (test on the rest as split "TRAIN>N"; nmt.data.splits)
    train_max_words: int | None = None
    vocab: VocabConfig = field(default_factory=VocabConfig)
    join: JoinConfig = field(default_factory=JoinConfig)
    # where prepared corpora are kept (nmt.data.cache); null: $NMT_CACHE_DIR or ~/.cache/nmt
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        check(self.src_lang != self.tgt_lang, "tgt_lang", "must differ from data.src_lang")
        check(self.max_len >= 2, "max_len", "must be at least 2")
        check(
            self.train_max_words is None or 1 <= self.train_max_words <= 2**31,
            "train_max_words",
            "must be in 1..2,147,483,648 (or null)",
        )
        names = {"src_lang": self.src_lang, "tgt_lang": self.tgt_lang, "train": self.train}
        names.update({"dev": self.dev}, **{f"test[{i}]": t for i, t in enumerate(self.test)})
        for key, name in names.items():
            check(
                plain_name(name) and name.isprintable(),
                key,
                f"{name!r}: a name of files in data.dir, not a path",
            )
