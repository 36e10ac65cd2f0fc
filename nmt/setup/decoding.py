"""The recipe's ``decode`` section (search settings) and ``nmt translate --sample``'s
options: torch-free, so that reading a recipe loads no model code."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from nmt.errors import ConfigError, NmtError
from nmt.setup.config import by_kind, check, check_seed, from_dict, parse_override
from nmt.setup.registry import Registry

# ``--length``: the recipe's bounds, or exactly the reference's length (Newman et al.
# 2020's oracle: what a model reads when the stop decision is taken from it)
LengthMode = Literal["model", "oracle"]
# ``decode.split`` (``nmt translate --split``): how a line of several sentences is read
SplitMode = Literal["none", "sentences", "marks"]


@dataclass(frozen=True)
class RemedyConfig:
    """An entry of ``decode.remedies``: a registered decoding remedy by its kind, with
    the options of its own config (a subclass of this one). The built-in remedies
    are the section's own keys (alpha, coverage, word_reward, min_len_a/b)."""

    kind: str


# Decoding remedies beyond the built-in keys (nmt.decoding.remedies): a plug-in
# registers a Remedy subclass, built from its RemedyConfig subclass, under a kind
REMEDIES = Registry("decoding remedy", base="nmt.decoding.remedies:Remedy")


@dataclass(frozen=True)
class DecodeConfig:
    """Search settings for validation, ``nmt translate`` and test evaluation."""

    beam: int = 5
    alpha: float = 1.0  # length penalty ((5 + len) / 6) ** alpha, Wu et al. 2016
    max_len_a: float = 1.5  # output length limit a * S + b
    max_len_b: int = 10
    min_len_a: float = 0.0  # no </s> before a * S + b output pieces
    min_len_b: int = 0
    # GNMT's coverage penalty β·Σ_s log min(Σ_t a_ts, 1) on the cross-attention's
    # weights (Wu et al. 2016, eq. 14); 0: none. Beam search only.
    coverage: float = 0.0
    # γ added to a hypothesis's score per output piece (Murray & Chiang 2018; Marian's
    # --word-penalty is −γ); 0: none. Beam search only.
    word_reward: float = 0.0
    batch_tokens: int = 8192
    n_best: int = 1
    # evaluate (and compare) with the mean of the last N kept checkpoints instead of
    # best.pt (nmt.export.averaging; needs train.keep_checkpoints >= N); 0: best.pt
    average_last: int = 0
    # none: each line translated as it is; sentences: each line cut into its sentences
    # (nmt.data.sentences), each translated apart, their outputs joined into one line;
    # marks: each line read whole with a separator between its sentences, as a
    # sentence-group model (model.decoder.group_layers) was trained to read them
    split: SplitMode = "none"
    split_lang: str | None = None  # the sentence rules' language; null: data.src_lang
    # nmt translate names the lines whose output has fewer pieces than this share of
    # length_ratio × their source's pieces (an early stop); 0: no check
    short: float = 0.5
    # the training pairs' mean target/source length in pieces, measured when the run
    # is built (what translate predicts an output's length from)
    length_ratio: float | None = None
    # more remedies, registered ones by kind, applied after the built-in ones in order
    remedies: tuple[RemedyConfig, ...] = field(
        default=(), metadata=by_kind(REMEDIES, "", key="kind")
    )

    def inert_keys(self) -> dict[str, str]:
        if self.split != "none":
            return {}
        return {"split_lang": "only split sentences and marks use it (split is 'none')"}

    def from_data(self, lengths: np.ndarray) -> tuple[DecodeConfig, str | None]:
        """``length_ratio`` measured on the training pairs' (source, target) pieces
        (N,2), ``</s>`` and ``<s>`` left out as translate counts them."""
        if self.length_ratio is not None or not len(lengths):
            return self, None
        pieces = np.maximum(np.asarray(lengths) - 1, 1)  # (N,2)
        ratio = float(np.mean(pieces[:, 1] / pieces[:, 0]))
        measured = f"{ratio:.3f} (mean target/source pieces on the training data)"
        return dataclasses.replace(self, length_ratio=ratio), f"decode.length_ratio = {measured}"

    def __post_init__(self) -> None:
        check(1 <= self.beam <= 1024, "beam", "must be in 1..1024 (and at most the vocabulary)")
        check(0 <= self.alpha <= 100, "alpha", "must be in [0, 100]")
        check(0 <= self.max_len_a <= 1000, "max_len_a", "must be in 0..1000")
        check(1 <= self.max_len_b <= 2**20, "max_len_b", "must be in 1..1,048,576")
        check(
            0 <= self.min_len_a <= self.max_len_a,
            "min_len_a",
            f"must be in 0..decode.max_len_a ({self.max_len_a})",
        )
        check(
            0 <= self.min_len_b <= self.max_len_b,
            "min_len_b",
            f"must be in 0..decode.max_len_b ({self.max_len_b})",
        )
        check(0 <= self.coverage <= 100, "coverage", "must be in [0, 100] (0: no penalty)")
        check(-100 <= self.word_reward <= 100, "word_reward", "must be in [-100, 100]")
        for key, value in (("coverage", self.coverage), ("word_reward", self.word_reward)):
            check(
                value == 0 or self.beam > 1,
                key,
                "changes how beam search ranks hypotheses; with beam 1 it would change "
                "nothing (set decode.beam above 1)",
            )
        check(1 <= self.batch_tokens <= 2**26, "batch_tokens", "must be in 1..67,108,864")
        check(1 <= self.n_best <= self.beam, "n_best", "must be between 1 and decode.beam")
        check(0 <= self.average_last <= 10_000, "average_last", "must be in 0..10,000")
        check(
            self.split != "sentences" or self.n_best == 1,
            "n_best",
            "a line cut into sentences has one output (decode.split sentences)",
        )
        check(0 <= self.short < 1, "short", "must be in [0, 1) (0: no check)")
        check(
            self.length_ratio is None or 0.01 <= self.length_ratio <= 100,
            "length_ratio",
            "must be in 0.01..100 (a target/source length ratio; null: measured)",
        )


@dataclass(frozen=True)
class Sampling:
    """Draw each token instead of searching (``nmt translate --sample``): from the
    model's distribution at ``temperature``, cut to the ``top_k`` most probable
    tokens (Fan et al. 2018; 0: no cut) and to the smallest set holding ``top_p`` of
    the probability (nucleus sampling, Holtzman et al. 2020; 1: no cut). Draws come
    from one generator seeded with ``seed``: the same input, settings and seed give
    the same output."""

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 1

    def __post_init__(self) -> None:
        check(0 < self.temperature <= 100, "temperature", "must be in (0, 100]")
        check(self.top_k >= 0, "top_k", "must be non-negative (0: no cut)")
        check(0 < self.top_p <= 1, "top_p", "must be in (0, 1] (1: no cut)")
        check_seed(self.seed, "seed")


def with_overrides(cfg: DecodeConfig, overrides: list[str]) -> DecodeConfig:
    """``cfg`` with each ``decode.KEY=VALUE`` of ``--set`` applied (checked as a recipe's
    decode section is); another section, an unknown key or an absurd value is a
    one-line error naming the ``--set``."""
    values = {}
    for text in overrides:
        keys, value = parse_override(text)
        if len(keys) != 2 or keys[0] != "decode":
            raise NmtError(f"--set {text}: only decode.KEY=VALUE can change here")
        values[keys[1]] = value
    return with_values(cfg, values, said="--set ")


def with_values(cfg: DecodeConfig, values: Mapping[str, Any], said: str = "") -> DecodeConfig:
    """``cfg`` with keys of its section set to Python values (nmt.api's keyword
    arguments, taken as given: not read as YAML text, so ``None`` stays None), checked
    as a recipe's decode section is: an unknown key or an absurd value is a one-line
    error naming ``decode.KEY``, after ``said`` (the option that gave it)."""
    try:
        return from_dict(DecodeConfig, {**dataclasses.asdict(cfg), **values}, "decode")
    except ConfigError as e:
        raise NmtError(f"{said}{e}") from None


def length_mode(text: str) -> LengthMode:
    """``--length``'s value, checked."""
    if text not in ("model", "oracle"):
        raise NmtError(f"--length {text}: model (the recipe's bounds) or oracle (the reference's)")
    return "oracle" if text == "oracle" else "model"


def split_mode(text: str) -> SplitMode:
    """``--split``'s value, checked (the option, not ``--set decode.split``, named)."""
    modes = typing.get_args(SplitMode)
    if text not in modes:
        raise NmtError(f"--split {text}: one of {', '.join(modes)}")
    return text  # type: ignore[return-value]


def decoding(entries: tuple[str, ...] | list[str]) -> tuple[list[str], LengthMode]:
    """A comparison spec's decoding (``decode.KEY=VALUE`` entries and at most one
    ``length=model|oracle``) as ``--set`` overrides and a length mode."""
    lengths = [
        e.partition("=")[2].strip() for e in entries if e.partition("=")[0].strip() == "length"
    ]
    if len(lengths) > 1:
        raise NmtError("length= given twice")
    rest = [e for e in entries if e.partition("=")[0].strip() != "length"]
    return rest, length_mode(lengths[0]) if lengths else "model"


def decode_tag(overrides: list[str], length: LengthMode, data: str | None = None) -> str:
    """What makes an evaluation differ from the recipe's own, for its name in
    results.json and its .hyp file ("" for the recipe's own); ``data``: the name of
    another corpus directory its splits come from."""
    parts = [*overrides, *([f"length={length}"] if length != "model" else [])]
    return ",".join(parts + ([f"data={data}"] if data is not None else []))


def evaluation_name(split: str, tag: str) -> str:
    """A split's name in results.json and its .hyp file under the decoding ``tag``
    (:func:`decode_tag`): ``SPLIT@TAG``, or the split's own for the recipe's."""
    return f"{split}@{tag}" if tag else split
