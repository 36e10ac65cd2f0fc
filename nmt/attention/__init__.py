"""Cross-attention variants behind one registry (see docs/design.md).

The registry and every variant's config live in :mod:`nmt.setup.attention`,
which loads no torch; the contract is :mod:`nmt.attention.base`, and a variant's
code is imported when a model first builds it."""

from nmt.setup.attention import ATTENTION, AttentionConfig

__all__ = ["ATTENTION", "AttentionConfig"]
