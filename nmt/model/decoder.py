"""Decoder stacks (``model.decoder.kind``) and the state they carry between steps.

A stack is an ``nn.ModuleList`` of :class:`DecoderLayer` (so parameter names
stay ``decoder.N.…`` for every kind) whose ``forward`` maps raw target token
embeddings to final states. Kinds register in ``DECODERS``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from nmt.attention.base import AttentionOutput, Context, DiagonalBias, Memory, SentenceGroups
from nmt.model.layers import Caches, DecoderLayer, Embedding
from nmt.setup.model import ModelConfig


@dataclass
class DecoderState:
    """Everything the decoder needs besides the target prefix; reorderable for beams."""

    memories: list[Memory]  # per decoder layer: projected encoder keys/values
    caches: list[Caches] | None = None  # the stack's ``new_caches``, filled
    offset: int = 0  # target positions already decoded (incremental mode)
    # sentence groups: each source position's sentence (B,S), and the separators
    # among the target positions already decoded (B,1) (incremental mode)
    sentences: Tensor | None = None
    separators: Tensor | None = None
    # SHAPE's offsets (B,1) that the targets share with their sources in training
    # (model.positions.tie_shift); None: the target embedding draws its own, or none
    shift: Tensor | None = None

    def select(self, index: Tensor, same_source: bool = False) -> DecoderState:
        """Keep batch rows ``index`` (B',) — for beam search and finished sentences.

        ``same_source``: every kept row reads the same source sentence as the row it
        replaces (a beam reordered within its sentence), so the encoder memories and
        source mask, identical over those rows, are kept as they are, not copied.
        """
        caches = (
            None
            if self.caches is None
            else [
                {name: {k: v[index] for k, v in own.items()} for name, own in c.items()}
                for c in self.caches
            ]
        )
        separators = None if self.separators is None else self.separators[index]
        shift = None if self.shift is None else self.shift[index]
        if same_source:
            return DecoderState(
                self.memories, caches, self.offset, self.sentences, separators, shift
            )
        sentences = None if self.sentences is None else self.sentences[index]
        memories = [m.select(index) for m in self.memories]
        return DecoderState(memories, caches, self.offset, sentences, separators, shift)


class DecoderStack(nn.ModuleList):
    """Layers plus how a target sequence flows through them."""

    layer: type[DecoderLayer] = DecoderLayer

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(self.layer(cfg) for _ in range(cfg.decoder_layers))
        self.cfg = cfg
        if cfg.positions.cross_alibi and cfg.positions.ratio is None:
            raise ValueError("cross_alibi needs model.positions.ratio (the trainer measures it)")

    def new_caches(self) -> list[Caches]:
        """Empty caches for incremental decoding: per layer, each of its sub-modules'
        state of the steps decoded so far (the self-attention's keys/values, the
        fusion's history), under the sub-module's name."""
        return [{} for _ in self]

    def new_state(
        self, memory: Tensor, src_mask: Tensor, incremental: bool, sentences: Tensor | None
    ) -> DecoderState:
        """The encoder output (B,S,D) projected once for each layer, and, when
        ``incremental``, empty caches; ``sentences`` (B,S): each source position's
        sentence (sentence groups)."""
        memories = [layer.project_memory(memory, src_mask) for layer in self]
        return DecoderState(memories, self.new_caches() if incremental else None, 0, sentences)

    def context(
        self,
        state: DecoderState,
        T: int,
        update: int,
        need_weights: bool,
        groups: SentenceGroups | None,
    ) -> Context:
        """What flows down with T queries after ``state.offset`` decoded positions;
        under ``cross_alibi``, the bias of each query's distance from its sentence's
        diagonal (:class:`~nmt.attention.base.DiagonalBias`); the queries' sentence
        ``groups``, which the lowest ``decoder.group_layers`` layers keep to."""
        memory = state.memories[0]
        positions = torch.arange(state.offset, state.offset + T, device=memory.key.device)  # (T,)
        p = self.cfg.positions
        bias = DiagonalBias.of(positions, memory.lengths, p.ratio) if p.cross_alibi else None
        return Context(positions, update, need_weights, bias, groups)

    def forward(
        self,
        embeds: Tensor,
        embedding: Embedding,
        state: DecoderState,
        ctx: Context,
        tgt_mask: Tensor | None = None,
    ) -> tuple[Tensor, list[list[AttentionOutput]]]:
        """Raw token embeddings (B,T,D) of the target inputs -> states (B,T,D) before
        the final norm, and per layer what each of its cross-attention calls
        returned, the call of the stream that predicts first (its weights, under
        ``ctx.need_weights``, are what maps, alignments and guided alignment read;
        hard attention's REINFORCE term travels in the calls' ``loss``). ``tgt_mask``
        (B,T) marks real target inputs (None: all real); the causal mask already
        keeps a left-to-right stream off later padding. Does not advance
        ``state.offset``."""
        raise NotImplementedError


class StandardDecoder(DecoderStack):
    """One causal stream: position t reads target inputs ≤ t (Vaswani et al. 2017)."""

    def forward(
        self,
        embeds: Tensor,
        embedding: Embedding,
        state: DecoderState,
        ctx: Context,
        tgt_mask: Tensor | None = None,
    ) -> tuple[Tensor, list[list[AttentionOutput]]]:
        x = embedding(embeds, offset=state.offset, draw=state.shift)  # (B,T,D)
        attention = []
        for i, layer in enumerate(self):
            cache = state.caches[i] if state.caches is not None else None
            memory = state.memories[i]
            if ctx.groups is not None and i < self.cfg.decoder.group_layers:
                memory = ctx.groups.restrict(memory)  # the query's own sentence
            x, attended = layer(x, memory, ctx, cache)
            attention.append([attended])
        return x, attention
