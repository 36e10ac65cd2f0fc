"""The encoder-decoder: ``encode``, ``start``, ``decode`` and ``forward``."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from nmt.attention import Attended, Memory
from nmt.attention.base import key_bias
from nmt.config import ModelConfig
from nmt.model.layers import DecoderLayer, Embedding, EncoderLayer


@dataclass
class DecoderState:
    """Everything the decoder needs besides the target prefix; reorderable for beams."""

    memories: list[Memory]  # per decoder layer: projected encoder keys/values
    src_mask: Tensor  # (B,1,S)
    caches: list[dict[str, Tensor]] | None = None  # per layer self-attention K/V
    offset: int = 0  # target positions already decoded (incremental mode)
    attended: list[Attended] = field(default_factory=list)  # last step, if weights asked

    def select(self, index: Tensor) -> DecoderState:
        """Keep batch rows ``index`` (B',) — for beam search and finished sentences."""
        memories = [Memory(m.key[index], m.value[index], m.lengths[index]) for m in self.memories]
        caches = (
            None
            if self.caches is None
            else [{k: v[index] for k, v in c.items()} for c in self.caches]
        )
        return DecoderState(memories, self.src_mask[index], caches, self.offset)


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
        self.encoder = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.encoder_layers))
        self.encoder_norm = nn.LayerNorm(d)
        self.decoder = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.decoder_layers))
        self.decoder_norm = nn.LayerNorm(d)
        self.generator = nn.Linear(d, tgt_vocab, bias=False)
        for name, p in self.named_parameters():
            if p.dim() == 2 and "embed" not in name and "score" not in name:
                nn.init.xavier_uniform_(p)
        if cfg.tie_embeddings:
            self.generator.weight = self.tgt_embed.tokens.weight

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """src (B,S) -> memory (B,S,D), src_mask (B,1,S) (True = real token)."""
        src_mask = (src != self.pad).unsqueeze(1)  # (B,1,S)
        bias = key_bias(src_mask.unsqueeze(1), self.tgt_embed.positions.dtype)  # (B,1,1,S)
        x = self.src_embed(self.src_embed.tokens(src))
        for layer in self.encoder:
            x = layer(x, bias)
        return self.encoder_norm(x), src_mask

    def start(self, memory: Tensor, src_mask: Tensor, incremental: bool = False) -> DecoderState:
        """Project the memory once per layer; ``incremental`` keeps self-attention caches."""
        memories = [layer.cross_attn.project_memory(memory, src_mask) for layer in self.decoder]
        caches = [{} for _ in self.decoder] if incremental else None
        return DecoderState(memories, src_mask, caches)

    def decode(
        self,
        tgt_in: Tensor | None,
        state: DecoderState,
        embeds: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor:
        """Target ids (B,T) — or raw token ``embeds`` (B,T,D) — -> logits (B,T,V).

        In incremental mode ``tgt_in`` holds only the new positions; the state's
        caches advance. With ``need_weights`` each layer's cross-attention is
        kept in ``state.attended``.
        """
        return self.generator(self.decode_states(tgt_in, state, embeds, need_weights))

    def decode_states(
        self,
        tgt_in: Tensor | None,
        state: DecoderState,
        embeds: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor:
        """As :meth:`decode`, but the final decoder states (B,T,D) before the output
        projection, for callers that need logits at a few positions only."""
        if embeds is None:
            embeds = self.tgt_embed.tokens(tgt_in)  # (B,T,D)
        T = embeds.size(1)
        positions = torch.arange(state.offset, state.offset + T, device=embeds.device)  # (T,)
        x = self.tgt_embed(embeds, offset=state.offset)
        state.attended = []
        for i, layer in enumerate(self.decoder):
            cache = state.caches[i] if state.caches is not None else None
            x, attended = layer(
                x, state.memories[i], state.src_mask, positions, cache, need_weights
            )
            if need_weights:
                state.attended.append(attended)
        if state.caches is not None:
            state.offset += T
        return self.decoder_norm(x)  # (B,T,D)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher forcing: src (B,S), tgt_in (B,T) -> logits (B,T,V)."""
        memory, src_mask = self.encode(src)
        return self.decode(tgt_in, self.start(memory, src_mask))

    def extra_loss(self, reward: Tensor, tgt_mask: Tensor) -> Tensor | None:
        """Sum of the cross-attention layers' auxiliary losses (hard attention).

        reward (B,T): detached log-likelihood of each target token; tgt_mask (B,T).
        """
        losses = [
            loss
            for layer in self.decoder
            if (loss := layer.cross_attn.extra_loss(reward, tgt_mask)) is not None
        ]
        return torch.stack(losses).sum() if losses else None

    def attention_stats(self) -> dict[str, float]:
        """Mean of the cross-attention layers' training statistics (e.g. REINFORCE reward)."""
        stats: dict[str, list[float]] = {}
        for layer in self.decoder:
            for k, v in getattr(layer.cross_attn, "stats", {}).items():
                stats.setdefault(k, []).append(v)
        return {f"attn_{k}": sum(v) / len(v) for k, v in stats.items()}
