"""A user's position scheme, written outside the nmt package: no positions at all
(a bag of words to every attention: a baseline for what positions bring).

tests/model/test_positions.py imports it as a plug-in and trains with
``model.positions.kind: none``."""

from __future__ import annotations

from nmt.model.positions import PositionScheme
from nmt.setup.model import POSITIONS, PositionsConfig


@POSITIONS.register("none", config=PositionsConfig)
class NoPositions(PositionScheme):
    """Adds nothing to the embeddings nor to self-attention: the hooks' defaults."""
