"""The Transformer encoder-decoder; its encoder blocks and decoder stacks are the
registries ``ENCODER_BLOCKS`` and ``DECODERS`` (nmt.model.config)."""

from nmt.model.decoder import DecoderState
from nmt.model.seq2seq import Transformer

__all__ = ["DecoderState", "Transformer"]
