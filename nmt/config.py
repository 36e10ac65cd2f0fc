"""Recipes: YAML -> dict -> ``--set`` overrides -> strict, frozen dataclasses.

Every section is a frozen dataclass. ``from_dict`` is strict: an unknown key,
a wrong type or an impossible value raises :class:`ConfigError` naming the
dotted key (with a close-match suggestion for misspelt keys). Cross-field
checks live in each class's ``__post_init__``. A section whose other values
make a key useless says so in ``inert_keys()``; giving such a key a value other
than its default is an error, so that no setting is silently ignored.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import yaml

from nmt.errors import ConfigError, NmtError


def check(ok: bool, key: str, message: str) -> None:
    """Raise ``ConfigError(key, message)`` unless ``ok``; for ``__post_init__``."""
    if not ok:
        raise ConfigError(key, message)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def from_dict(cls: type, data: Any, path: str = "") -> Any:
    """Build dataclass ``cls`` from ``data``, strictly; errors name ``path.key``."""
    if not isinstance(data, dict):
        raise ConfigError(path, f"expected a mapping, got {_type_name(data)}")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in fields(cls) if f.init}
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1)
            hint = f" (did you mean {_join(path, close[0])!r}?)" if close else ""
            raise ConfigError(_join(path, str(key)), f"unknown key{hint}")
    for name, f in known.items():
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and name not in data:
            raise ConfigError(_join(path, name), "required key is missing")
    kwargs = {k: _convert(hints[k], v, _join(path, k)) for k, v in data.items()}
    try:
        built = cls(**kwargs)
    except ConfigError as e:
        raise e.under(path) from None
    inert = getattr(built, "inert_keys", dict)()
    for key, why in inert.items():
        if key in data and getattr(built, key) != _default(known[key]):
            raise ConfigError(_join(path, key), f"has no effect: {why}; remove it")
    return built


def _default(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def _convert(tp: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _convert(inner, value, path)
    if origin is Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            raise ConfigError(path, f"must be one of {', '.join(map(str, allowed))}, got {value!r}")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(path, f"expected a list, got {_type_name(value)}")
        (inner, _ellipsis) = typing.get_args(tp)
        return tuple(_convert(inner, v, f"{path}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(path, f"expected a mapping, got {_type_name(value)}")
        (_key, inner) = typing.get_args(tp)
        return {str(k): _convert(inner, v, _join(path, str(k))) for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        build = getattr(tp, "from_recipe", None)
        return build(value, path) if build else from_dict(tp, value, path)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(path, f"expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(path, f"expected an integer, got {value!r}")
        return value
    if tp is float:
        # YAML 1.1 reads 7e-4 (no dot) as a string; accept it as the number it is.
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise ConfigError(path, f"expected a number, got {value!r}") from None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(path, f"expected a number, got {value!r}")
        if not math.isfinite(value):
            raise ConfigError(path, f"expected a finite number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(path, f"expected a string, got {value!r}")
        return value
    raise TypeError(f"unsupported recipe type {tp!r} at {path}")  # a bug, not user input


# --------------------------------------------------------------------- sections


@dataclass(frozen=True)
class VocabConfig:
    """SentencePiece vocabulary: trained on the training data unless ``model`` is given."""

    size: int = 8000
    joint: bool = True
    type: Literal["unigram", "bpe"] = "unigram"
    model: str | None = None  # joint: one .model file; separate: use src_model/tgt_model
    src_model: str | None = None
    tgt_model: str | None = None

    def __post_init__(self) -> None:
        check(self.size >= 8, "size", "must be at least 8")
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
        if self.model is None and self.src_model is None:
            return {}
        why = "a given SentencePiece model fixes the vocabulary"
        return {"size": why, "type": why}


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
    vocab: VocabConfig = field(default_factory=VocabConfig)

    def __post_init__(self) -> None:
        check(self.src_lang != self.tgt_lang, "tgt_lang", "must differ from data.src_lang")
        check(self.max_len >= 2, "max_len", "must be at least 2")


@dataclass(frozen=True)
class AttentionConfig:
    """Base of every cross-attention variant's options; ``kind`` picks the variant.

    Each variant in ``nmt.attention`` subclasses this with its own typed options.
    """

    kind: str = "global"
    # bidaf: fuse [h; c; h∘c; h∘c̃] after the cross-attention (nmt.attention.fusion)
    fusion: Literal["none", "bidaf"] = "none"

    @classmethod
    def from_recipe(cls, data: Any, path: str) -> AttentionConfig:
        from nmt.attention import ATTENTION  # the variants register their configs

        if not isinstance(data, dict):
            raise ConfigError(path, f"expected a mapping, got {_type_name(data)}")
        kind = data.get("kind", "global")
        if not isinstance(kind, str) or kind not in ATTENTION:
            valid = ", ".join(ATTENTION.names())
            close = difflib.get_close_matches(str(kind), ATTENTION.names(), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(_join(path, "kind"), f"unknown kind {kind!r}{hint}; valid: {valid}")
        options = {
            n: {f.name for f in fields(ATTENTION.get(n).config_class)} for n in ATTENTION.names()
        }
        for key in data:
            owners = [n for n, names in options.items() if key in names]
            if key not in options[kind] and owners:
                raise ConfigError(
                    _join(path, str(key)),
                    f"an option of kind {' and '.join(owners)}, not of kind {kind!r}",
                )
        return from_dict(ATTENTION.get(kind).config_class, data, path)


def _default_attention() -> AttentionConfig:
    return AttentionConfig.from_recipe({}, "model.attention")


@dataclass(frozen=True)
class EncoderConfig:
    """The encoder's block: ``transformer`` (self-attention, FFN) or ``qanet`` (Yu et
    al. 2018: depthwise-separable convolutions, self-attention, FFN)."""

    block: Literal["transformer", "qanet"] = "transformer"
    convs: int = 2  # qanet: convolutions per block (QANet: 4 embedding, 2 model encoder)
    kernel: int = 7  # qanet: convolution width, odd (QANet: 7)
    # qanet: stochastic depth; the deepest sub-layer survives with this probability,
    # shallower ones linearly more often (QANet: 0.9); 1 = off
    survival: float = 1.0

    def __post_init__(self) -> None:
        check(self.convs >= 0, "convs", "must be non-negative")
        check(self.kernel >= 1 and self.kernel % 2 == 1, "kernel", "must be odd and positive")
        check(0 < self.survival <= 1, "survival", "must be in (0, 1]")

    def inert_keys(self) -> dict[str, str]:
        if self.block == "qanet":
            return {}
        why = f"only block qanet uses it (block is {self.block!r})"
        return {"convs": why, "kernel": why, "survival": why}


@dataclass(frozen=True)
class DecoderConfig:
    """``standard`` (one causal stream) or ``two_stream`` (XLNet, Yang et al. 2019)."""

    kind: Literal["standard", "two_stream"] = "standard"
    # two_stream: the factorisation order in training; decoding is always left to right
    order: Literal["left_to_right", "random"] = "left_to_right"

    def __post_init__(self) -> None:
        check(
            self.order == "left_to_right" or self.kind == "two_stream",
            "order",
            "a random order needs model.decoder.kind two_stream",
        )


@dataclass(frozen=True)
class ModelConfig:
    """Pre-norm Transformer encoder-decoder (Vaswani et al. 2017)."""

    d_model: int = 256
    heads: int = 4
    ffn: int = 1024
    encoder_layers: int = 3
    decoder_layers: int = 3
    dropout: float = 0.1
    # Dropout on embeddings + positions; null = the same as ``dropout``.
    embed_dropout: float | None = None
    # normal: N(0, D^-0.5), then ×sqrt(D) (Vaswani et al. 2017, fairseq);
    # xavier: Xavier-uniform (Glorot & Bengio 2010) as JoeyNMT — smaller token vectors,
    # so positions weigh more at first and tied output logits start flatter.
    embed_init: Literal["normal", "xavier"] = "normal"
    tie_embeddings: bool = True  # decoder input embeddings = output projection
    max_positions: int = 1024
    attention: AttentionConfig = field(default_factory=_default_attention)
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    decoder: DecoderConfig = field(default_factory=DecoderConfig)

    def __post_init__(self) -> None:
        for name in ("d_model", "heads", "ffn", "encoder_layers", "decoder_layers"):
            check(getattr(self, name) >= 1, name, "must be at least 1")
        check(
            self.d_model % self.heads == 0, "heads", f"must divide model.d_model ({self.d_model})"
        )
        check(0.0 <= self.dropout < 1.0, "dropout", "must be in [0, 1)")
        e = self.embed_dropout
        check(e is None or 0.0 <= e < 1.0, "embed_dropout", "must be in [0, 1) or null")
        check(self.max_positions >= 8, "max_positions", "must be at least 8")
        check(
            self.decoder.order == "left_to_right"
            or getattr(self.attention, "estimator", None) != "reinforce",
            "decoder.order",
            "REINFORCE's reward to go assumes a left-to-right order; "
            "use estimator gumbel or straight_through with a random order",
        )


@dataclass(frozen=True)
class ScheduledSamplingConfig:
    """Two-pass scheduled sampling (Mihaylova & Martins 2019); ``passes`` > 2 is
    Duckworth et al. 2019's parallel scheduled sampling."""

    schedule: Literal["linear", "exponential", "inverse_sigmoid", "constant"] = "inverse_sigmoid"
    # linear: start (<= 1); exponential: base (< 1); inverse_sigmoid: k >= 1; constant: ε.
    # null: the schedule's default (DEFAULT_K), one that decays; constant needs a value.
    k: float | None = None
    c: float = 1e-4  # linear: decrease per step
    eps_min: float = 0.0  # linear: floor
    warmup_steps: int = 0  # pure teacher forcing first
    mix: Literal["argmax", "sample", "topk", "softmax", "gumbel"] = "softmax"
    topk: int = 5
    temperature: float = 1.0  # softmax and gumbel
    passes: int = 2
    first_pass_grad: bool = False

    def __post_init__(self) -> None:
        s = self.schedule
        check(self.k is not None or s != "constant", "k", "constant schedule needs k (ε, 0..1)")
        if self.k is None:
            object.__setattr__(self, "k", DEFAULT_K[s])
        if s == "exponential":
            check(0 < self.k < 1, "k", "exponential schedule needs 0 < k < 1")
        elif s == "inverse_sigmoid":
            check(self.k >= 1, "k", "inverse_sigmoid schedule needs k >= 1")
        elif s == "constant":
            check(0 <= self.k <= 1, "k", "constant schedule needs 0 <= k <= 1")
        else:  # linear: max(eps_min, k − c·i) must fall below 1
            check(
                0 <= self.k <= 1,
                "k",
                "linear schedule starts at 0 <= k <= 1 (delay it with warmup_steps)",
            )
            check(self.c > 0, "c", "linear schedule needs c > 0, else ε stays k")
            check(self.eps_min < 1, "eps_min", "linear schedule needs eps_min < 1, else ε stays 1")
        check(self.c >= 0, "c", "must be non-negative")
        check(0 <= self.eps_min <= 1, "eps_min", "must be in [0, 1]")
        check(self.warmup_steps >= 0, "warmup_steps", "must be non-negative")
        check(self.topk >= 1, "topk", "must be at least 1")
        check(self.temperature > 0, "temperature", "must be positive")
        check(self.passes >= 2, "passes", "must be at least 2")

    def inert_keys(self) -> dict[str, str]:
        inert = {}
        if self.schedule != "linear":
            why = f"only schedule linear uses it (schedule is {self.schedule!r})"
            inert.update(c=why, eps_min=why)
        if self.mix != "topk":
            inert["topk"] = f"only mix topk uses it (mix is {self.mix!r})"
        if self.mix not in ("softmax", "gumbel"):
            inert["temperature"] = f"only mix softmax and gumbel use it (mix is {self.mix!r})"
        return inert


# ε_i = 1 − o(1) at the start, falling over a few thousand updates: linear reaches 0.9
# after 1,000 updates (c = 1e-4), exponential after ~1,050, inverse sigmoid (Bengio et
# al. 2015's curve) after ~10,800.
DEFAULT_K = {"linear": 1.0, "exponential": 0.9999, "inverse_sigmoid": 2000.0}


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation, budget, validation and early stopping."""

    trainer: str = "teacher_forcing"
    seed: int = 1
    batch_tokens: int = 4096  # padded source or target tokens per batch, whichever is larger
    batching: Literal["bucketed", "random"] = "bucketed"  # batch composition (see batching.py)
    accumulate: int = 1  # gradient accumulation: batches per update
    lr: float = 7e-4  # peak learning rate, reached after warmup steps
    warmup: int = 1000
    betas: tuple[float, ...] = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.0
    clip_norm: float = 1.0  # 0 disables gradient clipping
    label_smoothing: float = 0.1
    max_epochs: int | None = None
    max_steps: int | None = None
    max_minutes: float | None = None
    valid_every: int = 1000  # steps between validations (and last.pt saves)
    valid_bleu: bool = True  # greedy-decode the dev set and report BLEU
    early_stopping: Literal["bleu", "loss"] = "bleu"
    patience: int | None = None  # validations without improvement before stopping
    log_every: int = 50
    max_bad_steps: int = 20  # consecutive non-finite losses before the run stops
    compile: bool = False  # torch.compile the model's teacher-forced forward pass
    # matmul precision: auto = bf16 autocast on CUDA, fp32 on the CPU; bf16 on the CPU pays
    # where it has bf16 matrix units (AMX, AVX512-BF16), parameters and optimiser stay fp32
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    scheduled_sampling: ScheduledSamplingConfig = field(default_factory=ScheduledSamplingConfig)

    def __post_init__(self) -> None:
        from nmt.training import TRAINERS

        if self.trainer not in TRAINERS:
            close = difflib.get_close_matches(self.trainer, TRAINERS.names(), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            check(
                False,
                "trainer",
                f"unknown trainer {self.trainer!r}{hint}; valid: {', '.join(TRAINERS.names())}",
            )
        for name in ("batch_tokens", "accumulate", "valid_every", "log_every", "max_bad_steps"):
            check(getattr(self, name) >= 1, name, "must be at least 1")
        check(self.lr > 0, "lr", "must be positive")
        check(self.warmup >= 0, "warmup", "must be non-negative")
        check(
            len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas),
            "betas",
            "must be two numbers in [0, 1)",
        )
        check(
            self.valid_bleu or self.early_stopping != "bleu",
            "early_stopping",
            "bleu needs train.valid_bleu: true (or use early_stopping: loss)",
        )
        check(self.clip_norm >= 0, "clip_norm", "must be non-negative")
        check(0 <= self.label_smoothing < 1, "label_smoothing", "must be in [0, 1)")
        for name in ("max_epochs", "max_steps", "max_minutes", "patience"):
            value = getattr(self, name)
            check(value is None or value > 0, name, "must be positive (or null)")
        check(
            any(getattr(self, n) is not None for n in ("max_epochs", "max_steps", "max_minutes")),
            "max_epochs",
            "set a budget: train.max_epochs, train.max_steps or train.max_minutes",
        )

    def inert_keys(self) -> dict[str, str]:
        if self.trainer == "scheduled_sampling":
            return {}
        return {"scheduled_sampling": f"train.trainer is {self.trainer!r}, not scheduled_sampling"}


@dataclass(frozen=True)
class DecodeConfig:
    """Search settings for validation, ``nmt translate`` and test evaluation."""

    beam: int = 5
    alpha: float = 1.0  # length penalty ((5 + len) / 6) ** alpha, Wu et al. 2016
    max_len_a: float = 1.5  # output length limit a * S + b
    max_len_b: int = 10
    batch_tokens: int = 8192
    n_best: int = 1

    def __post_init__(self) -> None:
        check(self.beam >= 1, "beam", "must be at least 1")
        check(self.alpha >= 0, "alpha", "must be non-negative")
        check(self.max_len_a >= 0 and self.max_len_b >= 1, "max_len_b", "must be at least 1")
        check(self.batch_tokens >= 1, "batch_tokens", "must be at least 1")
        check(1 <= self.n_best <= self.beam, "n_best", "must be between 1 and decode.beam")


@dataclass(frozen=True)
class RunConfig:
    """A whole recipe."""

    data: DataConfig
    run_dir: str
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=lambda: TrainConfig(max_epochs=10))
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def to_dict(self) -> dict[str, Any]:
        return _plain(dataclasses.asdict(self))


def _plain(value: Any) -> Any:
    """Tuples -> lists, so the dict dumps to plain YAML and loads back the same."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


# ------------------------------------------------------------------- loading


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"model.attention.window=5"`` -> (["model", "attention", "window"], 5)."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise NmtError(f"--set {text!r}: expected KEY.PATH=VALUE")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw
    return key.strip().split("."), value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of ``data`` with each ``KEY.PATH=VALUE`` override set."""
    import copy

    data = copy.deepcopy(data)
    for text in overrides:
        keys, value = parse_override(text)
        node = data
        for i, key in enumerate(keys[:-1]):
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise NmtError(f"--set {text!r}: {'.'.join(keys[: i + 1])} is not a section")
            node = child
        node[keys[-1]] = value
    return data


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Parse a YAML mapping safely; errors name the file (and line)."""
    path = Path(path)
    if not path.is_file():
        raise NmtError(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise NmtError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or "invalid YAML"
        raise NmtError(f"{path}:{where}: not valid YAML ({problem})") from None
    if not isinstance(data, dict):
        raise NmtError(f"{path}: a recipe must be a YAML mapping, got {_type_name(data)}")
    return data


def load_recipe(path: str | Path, overrides: list[str] | None = None) -> RunConfig:
    """Load a recipe file, apply ``--set`` overrides, validate into a RunConfig."""
    data = apply_overrides(read_yaml(path), overrides or [])
    try:
        return from_dict(RunConfig, data)
    except ConfigError as e:
        raise NmtError(f"{path}: {e}") from None


def config_from_dict(data: dict[str, Any]) -> RunConfig:
    """Rebuild a RunConfig stored in a checkpoint or a run directory."""
    return from_dict(RunConfig, data)


def dump_recipe(cfg: RunConfig) -> str:
    return yaml.safe_dump(cfg.to_dict(), sort_keys=False, allow_unicode=True)
