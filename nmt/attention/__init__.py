"""Cross-attention variants behind one registry (see DESIGN.md)."""

from nmt.attention import global_attention  # noqa: F401  (registers "global")
from nmt.attention.base import ATTENTION, SCORES, Attended, CrossAttention, Memory

__all__ = ["ATTENTION", "SCORES", "Attended", "CrossAttention", "Memory"]
