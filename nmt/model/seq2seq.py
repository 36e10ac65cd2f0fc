"""The encoder-decoder: ``encode``, ``start``, ``decode`` and ``forward``.

The encoder's block (``model.encoder.block``) and the decoder stack
(``model.decoder.kind``) come from registries: ``ENCODER_BLOCKS`` (transformer,
qanet) and ``DECODERS`` (standard, two_stream).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from nmt.attention.base import AttentionOutput, key_bias
from nmt.model.config import DECODERS, ENCODER_BLOCKS, ModelConfig
from nmt.model.decoder import DecoderState
from nmt.model.layers import Embedding


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
        self.tgt_embed = Embedding(tgt_vocab, d, pad, cfg.max_positions, drop, cfg.embed_init)
        self.src_embed = (
            self.tgt_embed
            if share_embeddings
            else Embedding(src_vocab, d, pad, cfg.max_positions, drop, cfg.embed_init)
        )
        block = ENCODER_BLOCKS.get(cfg.encoder.block)
        self.encoder = nn.ModuleList(block(cfg, i) for i in range(cfg.encoder_layers))
        self.encoder_norm = nn.LayerNorm(d)
        self.decoder = DECODERS.get(cfg.decoder.kind)(cfg)
        self.decoder_norm = nn.LayerNorm(d)
        self.generator = nn.Linear(d, tgt_vocab, bias=False)
        self.apply(self._init_weights)
        if cfg.tie_embeddings:
            self.generator.weight = self.tgt_embed.tokens.weight

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        """Xavier-uniform linear weights (Glorot & Bengio 2010), as the reference
        Transformer implementations; every other parameter keeps the initialisation
        its own module gives it (embeddings, scores, local_p's centre predictor)."""
        if isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """src (B,S) -> memory (B,S,D), src_mask (B,1,S) (True = real token)."""
        src_mask = (src != self.pad).unsqueeze(1)  # (B,1,S)
        bias = key_bias(src_mask.unsqueeze(1), self.tgt_embed.positions.dtype)  # (B,1,1,S)
        keep = src_mask.transpose(1, 2)  # (B,S,1)
        x = self.src_embed(self.src_embed.tokens(src))
        for layer in self.encoder:
            x = layer(x, bias, keep)
        return self.encoder_norm(x), src_mask

    def decoder_state(
        self, memory: Tensor, src_mask: Tensor, incremental: bool = False
    ) -> DecoderState:
        """Project the memory once per layer; ``incremental`` keeps the decoder's caches."""
        memories = [layer.cross_attn.project_memory(memory, src_mask) for layer in self.decoder]
        caches = self.decoder.new_caches() if incremental else None
        return DecoderState(memories, src_mask, caches)

    def decode(
        self, tgt_in: Tensor | None, state: DecoderState, embeds: Tensor | None = None
    ) -> Tensor:
        """Target ids (B,T) — or raw token ``embeds`` (B,T,D) — -> logits (B,T,V).

        In incremental mode ``tgt_in`` holds only the new positions; the state's
        caches advance. (:meth:`decode_states` also returns what each layer's
        cross-attention returned: its weights, when asked, reach callers there.)
        """
        return self.generator(self.decode_states(tgt_in, state, embeds)[0])

    def decode_states(
        self,
        tgt_in: Tensor | None,
        state: DecoderState,
        embeds: Tensor | None = None,
        need_weights: bool = False,
        tgt_mask: Tensor | None = None,
    ) -> tuple[Tensor, list[list[AttentionOutput]]]:
        """As :meth:`decode`, but the final decoder states (B,T,D) before the output
        projection (for callers that need logits at a few positions only), and per
        decoder layer what its cross-attention calls returned (for
        :meth:`extra_loss`). ``tgt_mask`` (B,T) marks the real target inputs when
        ``embeds`` replace ``tgt_in``."""
        if embeds is None:
            embeds = self.tgt_embed.tokens(tgt_in)  # (B,T,D)
            tgt_mask = tgt_in != self.pad  # (B,T)
        x, attention = self.decoder(embeds, self.tgt_embed, state, need_weights, tgt_mask)
        if state.caches is not None:
            state.offset += embeds.size(1)
        return self.decoder_norm(x), attention  # (B,T,D)

    def states(
        self, src: Tensor, tgt_in: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, list[list[AttentionOutput]]]:
        """Teacher forcing up to the output layer: src (B,S), tgt_in (B,T) -> the
        final decoder states (B,T,D) and the cross-attention outputs of
        :meth:`decode_states` (with the weights under ``need_weights``: guided
        alignment). What training runs: its loss applies the output layer, fused
        with it under ``train.kernels: auto``; ``train.compile`` compiles this."""
        memory, src_mask = self.encode(src)
        return self.decode_states(
            tgt_in, self.decoder_state(memory, src_mask), need_weights=need_weights
        )

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: src (B,S), tgt_in (B,T) -> logits (B,T,V)."""
        return self.generator(self.states(src, tgt_in)[0])

    def start_update(self, step: int) -> None:
        """Tell every cross-attention layer that optimiser update ``step`` begins."""
        for layer in self.decoder:
            layer.cross_attn.start_update(step)

    def extra_loss(
        self, attention: list[list[AttentionOutput]], reward: Tensor, tgt_mask: Tensor
    ) -> tuple[Tensor | None, dict[str, float]]:
        """Sum of the cross-attention layers' auxiliary losses (hard attention's
        REINFORCE) from ``attention`` (per layer, from :meth:`decode_states`), and the
        mean over layers of their statistics, as ``attn_*``.

        reward (B,T): detached reward of each target token (minus its training loss);
        tgt_mask (B,T).
        """
        losses, stats = [], {}
        for layer, calls in zip(self.decoder, attention):
            loss, layer_stats = layer.cross_attn.extra_loss(calls, reward, tgt_mask)
            if loss is not None:
                losses.append(loss)
            for k, v in layer_stats.items():
                stats.setdefault(f"attn_{k}", []).append(v)
        total = torch.stack(losses).sum() if losses else None
        return total, {k: sum(v) / len(v) for k, v in stats.items()}
