"""The Transformer encoder-decoder."""

from nmt.model.seq2seq import DecoderState, Transformer

__all__ = ["DecoderState", "Transformer"]
