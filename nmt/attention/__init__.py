"""Cross-attention variants behind one registry (see DESIGN.md)."""

from nmt.attention import global_attention, hard, local, sparsemax  # noqa: F401  (registration)
from nmt.attention.base import ATTENTION, SCORES, Attended, CrossAttention, Memory

__all__ = ["ATTENTION", "SCORES", "Attended", "CrossAttention", "Memory"]
