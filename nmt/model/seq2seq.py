"""The encoder-decoder: ``encode``, ``decoder_state``, ``decode`` (and ``decode_step``,
what search calls) and ``forward``.

The encoder's block (``model.encoder.block``) and the decoder stack
(``model.decoder.kind``) come from registries: ``ENCODER_BLOCKS`` (transformer,
qanet) and ``DECODERS`` (standard, two_stream).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from nmt.attention.base import AttentionOutput, SentenceGroups, key_bias
from nmt.model.decoder import DecoderState
from nmt.model.layers import Embedding
from nmt.setup.model import DECODERS, ENCODER_BLOCKS, ModelConfig


class Transformer(nn.Module):
    """Pre-norm Transformer encoder-decoder (Vaswani et al. 2017; pre-norm as in
    Wang et al. 2019) whose decoder cross-attention is the recipe's variant."""

    def __init__(
        self, cfg: ModelConfig, src_vocab: int, tgt_vocab: int, pad: int, share_embeddings: bool
    ) -> None:
        super().__init__()
        self.cfg = cfg
        self.pad = pad
        d = cfg.d_model
        drop = cfg.dropout if cfg.embed_dropout is None else cfg.embed_dropout
        where = (cfg.positions, cfg.max_positions)
        self.tgt_embed = Embedding(tgt_vocab, d, pad, *where, drop, cfg.embed_init)
        self.src_embed = (
            self.tgt_embed
            if share_embeddings
            else Embedding(src_vocab, d, pad, *where, drop, cfg.embed_init)
        )
        block = ENCODER_BLOCKS.get(cfg.encoder.block)
        self.encoder = nn.ModuleList(block(cfg, i) for i in range(cfg.encoder_layers))
        self.encoder_norm = nn.LayerNorm(d)
        self.decoder = DECODERS.get(cfg.decoder.kind)(cfg)
        self.decoder_norm = nn.LayerNorm(d)
        self.output = nn.Linear(d, tgt_vocab, bias=False)  # the output layer: states -> logits
        # sentence groups: the (source, target) separator, each vocabulary's last id
        # (nmt.data.vocab.Vocab)
        self.separators = (src_vocab - 1, tgt_vocab - 1) if cfg.decoder.group_layers else None
        self.apply(self._init_weights)
        if cfg.tie_embeddings:
            self.output.weight = self.tgt_embed.tokens.weight

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        """Xavier-uniform linear weights (Glorot & Bengio 2010), as the reference
        Transformer implementations; every other parameter keeps the initialisation
        its own module gives it (embeddings, scores, local_p's centre predictor)."""
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)

    def tied_shift(self, src: Tensor) -> Tensor | None:
        """The SHAPE offsets (B,1) that a training batch's sources src (B,S) and their
        targets share (``model.positions.tie_shift``); None where each embedding draws
        its own, or none is drawn."""
        if not self.cfg.positions.tie_shift:
            return None
        return self.src_embed.draw(src.size(0), src.device)

    def encode(self, src: Tensor, shift: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """src (B,S) -> memory (B,S,D), src_mask (B,1,S) (True = real token);
        ``shift``: :meth:`tied_shift`'s offsets."""
        src_mask = (src != self.pad).unsqueeze(1)  # (B,1,S)
        bias = key_bias(src_mask.unsqueeze(1), self.tgt_embed.tokens.weight.dtype)  # (B,1,1,S)
        keep = src_mask.transpose(1, 2)  # (B,S,1)
        x = self.src_embed(self.src_embed.tokens(src), draw=shift)
        for layer in self.encoder:
            x = layer(x, bias, keep)
        return self.encoder_norm(x), src_mask

    def decoder_state(
        self,
        memory: Tensor,
        src_mask: Tensor,
        incremental: bool = False,
        src: Tensor | None = None,
        shift: Tensor | None = None,
    ) -> DecoderState:
        """Project the memory once per layer; ``incremental`` keeps the decoder's caches.
        A sentence-group model reads its sentences off the source ids ``src`` (B,S);
        ``shift``, :meth:`tied_shift`'s offsets, moves the target positions as the
        source's."""
        sentences = None
        if self.separators is not None:
            if src is None:
                raise ValueError("a sentence-group model needs the source ids (src)")
            sentences = SentenceGroups.of_source(src, self.separators[0])
        state = self.decoder.new_state(memory, src_mask, incremental, sentences)
        state.shift = shift
        return state

    def decode(
        self, tgt_in: Tensor | None, state: DecoderState, embeds: Tensor | None = None
    ) -> Tensor:
        """Target ids (B,T) — or raw token ``embeds`` (B,T,D) — -> logits (B,T,V).

        In incremental mode ``tgt_in`` holds only the new positions; the state's
        caches advance. (:meth:`decode_states` also returns what each layer's
        cross-attention returned: its weights, when asked, reach callers there.)
        """
        return self.output(self.decode_states(tgt_in, state, embeds)[0])

    def decode_step(
        self, tgt_in: Tensor, state: DecoderState, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """What search needs of a step: target ids (B,T) -> logits (B,T,V) and, when
        asked, the cross-attention they were predicted with, the mean over layers and
        heads (B,T,S) (a two-stream decoder's predicting stream)."""
        states, attention = self.decode_states(tgt_in, state, need_weights=need_weights)
        if not need_weights:
            return self.output(states), None
        weights = torch.stack([calls[0].weights for calls in attention])  # (L,B,H,T,S)
        return self.output(states), weights.mean((0, 2))

    def decode_states(
        self,
        tgt_in: Tensor | None,
        state: DecoderState,
        embeds: Tensor | None = None,
        need_weights: bool = False,
        tgt_mask: Tensor | None = None,
        update: int = 0,
    ) -> tuple[Tensor, list[list[AttentionOutput]]]:
        """As :meth:`decode`, but the final decoder states (B,T,D) before the output
        layer (for callers that need logits at a few positions only), and per
        decoder layer what its cross-attention calls returned (their weights, and
        their own loss terms for the objective). ``tgt_mask`` (B,T) marks the real
        target inputs when ``embeds`` replace ``tgt_in``; ``update`` is the training
        update (0-based), for variants whose training follows a schedule. A
        sentence-group model counts its target sentences on ``tgt_in``, which it
        needs even where ``embeds`` are given."""
        if embeds is None:
            embeds = self.tgt_embed.tokens(tgt_in)  # (B,T,D)
            tgt_mask = tgt_in != self.pad  # (B,T)
        groups = self.target_groups(tgt_in, state)
        ctx = self.decoder.context(state, embeds.size(1), update, need_weights, groups)
        x, attention = self.decoder(embeds, self.tgt_embed, state, ctx, tgt_mask)
        if state.caches is not None:
            state.offset += embeds.size(1)
        return self.decoder_norm(x), attention  # (B,T,D)

    def target_groups(self, tgt_in: Tensor | None, state: DecoderState) -> SentenceGroups | None:
        """The sentence of each query of ``tgt_in`` (B,T) (None: not a sentence-group
        model); in incremental mode the state counts the separators decoded so far."""
        if state.sentences is None or self.separators is None:
            return None
        if tgt_in is None:
            raise ValueError("a sentence-group model needs the target ids (tgt_in)")
        seps = (tgt_in == self.separators[1]).cumsum(1)  # (B,T)
        if state.separators is not None:
            seps = seps + state.separators
        if state.caches is not None:
            state.separators = seps[:, -1:]
        return SentenceGroups.of(state.sentences, seps)

    def states(
        self, src: Tensor, tgt_in: Tensor, need_weights: bool = False, update: int = 0
    ) -> tuple[Tensor, list[list[AttentionOutput]]]:
        """Teacher forcing up to the output layer: src (B,S), tgt_in (B,T) -> the
        final decoder states (B,T,D) and the cross-attention outputs of
        :meth:`decode_states` (with the weights under ``need_weights``: guided
        alignment) at training ``update``. What training runs: its loss applies the
        output layer, fused with it under ``train.kernels: auto``; ``train.compile``
        compiles this."""
        shift = self.tied_shift(src)
        memory, src_mask = self.encode(src, shift)
        state = self.decoder_state(memory, src_mask, src=src, shift=shift)
        return self.decode_states(tgt_in, state, need_weights=need_weights, update=update)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: src (B,S), tgt_in (B,T) -> logits (B,T,V)."""
        return self.output(self.states(src, tgt_in)[0])
