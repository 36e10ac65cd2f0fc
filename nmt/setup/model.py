"""The recipe's ``model`` section: sizes, the encoder block, the decoder, and the
cross-attention variant (whose options are the variant's own config)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from nmt.setup.attention import ATTENTION, AttentionConfig
from nmt.setup.config import RATIO_BOUNDS, by_kind, check
from nmt.setup.registry import Registry


@dataclass(frozen=True)
class EncoderConfig:
    """Base of every encoder block's options (``model.encoder``); ``transformer``
    takes none, others register a subclass (``qanet``: :class:`QANetConfig`)."""

    block: str = "transformer"


@dataclass(frozen=True)
class QANetConfig(EncoderConfig):
    """``model.encoder`` with ``block: qanet``."""

    convs: int = 2  # convolutions per block (QANet: 4 embedding, 2 model encoder)
    kernel: int = 7  # convolution width, odd (QANet: 7)
    # stochastic depth; the deepest sub-layer survives with this probability, shallower
    # ones linearly more often (QANet: 0.9); 1 = off
    survival: float = 1.0

    def __post_init__(self) -> None:
        check(self.convs >= 0, "convs", "must be non-negative")
        check(self.kernel >= 1 and self.kernel % 2 == 1, "kernel", "must be odd and positive")
        check(0 < self.survival <= 1, "survival", "must be in (0, 1]")


@dataclass(frozen=True)
class DecoderConfig:
    """Base of every decoder stack's options (``model.decoder``); ``standard`` takes
    none of its own, others register a subclass (``two_stream``:
    :class:`TwoStreamConfig`). ``fusion`` is every decoder's: it wraps whichever
    cross-attention the recipe chooses."""

    kind: str = "standard"
    # bidaf: each layer fuses [h; c; h∘c; h∘c̃] after its cross-attention
    # (Seo et al. 2017; nmt.attention.fusion)
    fusion: Literal["none", "bidaf"] = "none"
    # sentence groups (G-Transformer, Bao et al. 2021): the lowest N layers'
    # cross-attention reads only the source sentence of the query's own target
    # sentence, the layers above the whole input; sentences are told apart by a
    # separator each vocabulary gains (nmt.attention.base.SentenceGroups). 0: off
    group_layers: int = 0

    def __post_init__(self) -> None:
        check(self.group_layers >= 0, "group_layers", "must be non-negative")

    def trains_left_to_right(self) -> bool:
        """Whether training predicts each token after the ones before it only."""
        return True


@dataclass(frozen=True)
class TwoStreamConfig(DecoderConfig):
    """``model.decoder`` with ``kind: two_stream``."""

    # the factorisation order in training; decoding is always left to right
    order: Literal["left_to_right", "random"] = "left_to_right"

    def __post_init__(self) -> None:
        super().__post_init__()
        check(
            self.group_layers == 0,
            "group_layers",
            "sentence groups count the separators decoded so far, left to right; the "
            "two-stream decoder's query stream does not read them (use kind standard)",
        )

    def trains_left_to_right(self) -> bool:
        return self.order == "left_to_right"


ABSOLUTE = ("sinusoidal", "learned")  # added to the embeddings, as opposed to in attention
MAX_SHIFT = 2**16  # a bound on SHAPE's offsets: the position table grows by it


@dataclass(frozen=True)
class PositionsConfig:
    """``model.positions``: how the model knows where a token is (nmt.model.positions).

    ``sinusoidal`` (Vaswani et al. 2017) and ``learned`` (Gehring et al. 2017) add
    an absolute position to each embedding; ``rope`` (Su et al. 2021) rotates every
    self-attention query and key by its position; ``alibi`` (Press et al. 2022) adds
    −m_h·|i − j| to every self-attention score; ``relative`` (Shaw et al. 2018) adds
    a learned key for the clipped distance j − i. The last three add nothing to the
    embeddings. Cross-attention knows no source position by itself, whatever the kind:
    ``cross_alibi`` adds −m_h·|s − t/r| to every variant's scores, a distance from
    the diagonal (r the mean target/source length ratio)."""

    kind: str = "sinusoidal"  # a POSITIONS entry (a plug-in registers its own)
    # SHAPE (Kiyono et al. 2021): in training every sequence's positions start at a
    # random offset in 0..shift (source and target drawn apart unless tie_shift);
    # none in decoding
    shift: int = 0
    # true: a pair's source and target draw one offset, so that source position i and
    # target position j keep their distance i - j; false: each draws its own
    tie_shift: bool = False
    max_distance: int = 16  # relative: distances beyond ±k share one key (Shaw et al.: k)
    cross_alibi: bool = False
    # cross_alibi's target/source length ratio r; null: measured on the training data
    ratio: float | None = None

    def __post_init__(self) -> None:
        check(0 <= self.shift <= MAX_SHIFT, "shift", f"must be in 0..{MAX_SHIFT:,}")
        check(1 <= self.max_distance <= 2**14, "max_distance", "must be in 1..16,384")
        check(self.ratio is None or 0.01 <= self.ratio <= 100, "ratio", RATIO_BOUNDS)
        check(POSITIONS.known(self.kind), "kind", POSITIONS.unknown(self.kind))
        check(
            self.shift == 0 or self.absolute(),
            "shift",
            f"shifts absolute positions; {self.kind} positions are relative, so a shift "
            "changes nothing (use sinusoidal or learned, or shift 0)",
        )

    def absolute(self) -> bool:
        """Whether the scheme adds its positions to the embeddings (a plug-in's config
        says so for its own kind)."""
        return self.kind in ABSOLUTE

    def inert_keys(self) -> dict[str, str]:
        inert = {}
        if self.shift == 0:
            inert["tie_shift"] = "only a shift uses it (shift is 0)"
        if self.kind != "relative":
            inert["max_distance"] = f"only kind relative uses it (kind is {self.kind!r})"
        if not self.cross_alibi:
            inert["ratio"] = "only cross_alibi uses it (cross_alibi is false)"
        return inert

    def from_data(self, lengths: np.ndarray) -> tuple[PositionsConfig, str | None]:
        """``ratio`` measured on the training data's (source, target) lengths (N,2)."""
        if not self.cross_alibi or self.ratio is not None:
            return self, None
        ratio = sum(t / s for s, t in lengths.tolist()) / len(lengths)
        measured = f"{ratio:.3f} (mean target/source length on the training data)"
        return replace(self, ratio=ratio), f"model.positions.ratio = {measured}"


# The position schemes (nmt.model.positions): each a PositionScheme subclass saying
# what it adds to the embeddings and to self-attention, imported when a model is
# built; a plug-in registers its own (with a PositionsConfig subclass for options).
POSITIONS = Registry("position scheme", base="nmt.model.positions:PositionScheme")
POSITIONS.register("sinusoidal", PositionsConfig, "nmt.model.positions:Sinusoidal")
POSITIONS.register("learned", PositionsConfig, "nmt.model.positions:Learned")
POSITIONS.register("rope", PositionsConfig, "nmt.model.positions:RoPE")
POSITIONS.register("alibi", PositionsConfig, "nmt.model.positions:ALiBiScheme")
POSITIONS.register("relative", PositionsConfig, "nmt.model.positions:Relative")

# The encoder blocks and decoder stacks: config, and the module built from it
# (imported when a model is built).
ENCODER_BLOCKS = Registry("encoder block", base="torch.nn:Module")
ENCODER_BLOCKS.register("transformer", EncoderConfig, "nmt.model.layers:EncoderLayer")
ENCODER_BLOCKS.register("qanet", QANetConfig, "nmt.model.qanet:QANetBlock")
DECODERS = Registry("decoder kind", base="nmt.model.decoder:DecoderStack")
DECODERS.register("standard", DecoderConfig, "nmt.model.decoder:StandardDecoder")
DECODERS.register("two_stream", TwoStreamConfig, "nmt.model.two_stream:TwoStreamDecoder")


# Upper bounds on the sizes (far beyond any model this toolkit trains), so that an
# absurd value is a clear error before anything is allocated; what fits in memory
# is checked when the model is built (nmt.training.build).
LIMITS = {
    "d_model": 2**16,
    "heads": 2**10,
    "ffn": 2**20,
    "encoder_layers": 2**10,
    "decoder_layers": 2**10,
}


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
    positions: PositionsConfig = field(
        default_factory=PositionsConfig, metadata=by_kind(POSITIONS, "sinusoidal")
    )
    attention: AttentionConfig = field(
        default_factory=ATTENTION.config("global"), metadata=by_kind(ATTENTION, "global")
    )
    encoder: EncoderConfig = field(
        default_factory=EncoderConfig, metadata=by_kind(ENCODER_BLOCKS, "transformer", "block")
    )
    decoder: DecoderConfig = field(
        default_factory=DecoderConfig, metadata=by_kind(DECODERS, "standard")
    )

    def __post_init__(self) -> None:
        for name, most in LIMITS.items():
            value = getattr(self, name)
            check(value >= 1, name, "must be at least 1")
            check(value <= most, name, f"must be at most {most:,} (a bound on what can be built)")
        check(
            self.d_model % self.heads == 0, "heads", f"must divide model.d_model ({self.d_model})"
        )
        check(0.0 <= self.dropout < 1.0, "dropout", "must be in [0, 1)")
        e = self.embed_dropout
        check(e is None or 0.0 <= e < 1.0, "embed_dropout", "must be in [0, 1) or null")
        check(8 <= self.max_positions <= 2**20, "max_positions", "must be in 8..1,048,576")
        head = self.d_model // self.heads
        check(
            self.positions.kind != "rope" or head % 2 == 0,
            "positions.kind",
            f"rope rotates pairs of a head's dimensions; the head size d_model/heads = "
            f"{head} is odd",
        )
        check(
            self.decoder.group_layers <= self.decoder_layers,
            "decoder.group_layers",
            f"must be at most model.decoder_layers ({self.decoder_layers})",
        )
        check(
            self.decoder.trains_left_to_right() or not self.attention.needs_left_to_right(),
            "decoder.order",
            "REINFORCE's reward to go assumes a left-to-right order; "
            "use estimator gumbel or straight_through with a random order",
        )
