"""nmt: a Transformer translation toolkit with pluggable cross-attention."""

__version__ = "0.1.0"
