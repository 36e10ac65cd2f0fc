"""The Transformer encoder-decoder; importing the block and decoder modules
registers them (``ENCODER_BLOCKS``, ``DECODERS``)."""

from nmt.model import qanet, two_stream  # noqa: F401  (registration)
from nmt.model.decoder import DecoderState
from nmt.model.seq2seq import Transformer

__all__ = ["DecoderState", "Transformer"]
