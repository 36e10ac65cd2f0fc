"""What earlier versions wrote, brought to today's layout on load, in one place.

A checkpoint carries a format ``version``; each step below takes a checkpoint's
weights from one version to the next, and :func:`upgrade_checkpoint` applies
them in turn when a checkpoint loads (nmt.io.checkpoint). A stored recipe (in a
checkpoint, or ``recipe.yaml`` beside a run) has no version of its own: each of
its earlier layouts is recognised by its keys (:func:`upgrade_recipe`). Every
migration has a test that loads what the earlier layout wrote
(tests/setup/test_migrations.py).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from nmt.errors import NmtError

VERSION = 2  # what nmt writes today

# Version 1 -> 2 (the model interface of Reshape III): the output layer is named
# ``output`` (it was ``generator``), hard attention keeps no update counter (the
# update reaches it with the queries), and -- names that version 1 already read --
# BiDAF fusion is a decoder-layer module (it wrapped the cross-attention, its
# variant under ``attn``, w_q in the score).
_RENAMED_1 = (
    (re.compile(r"^(decoder\.\d+)\.cross_attn\.attn\.score\.w_q$"), r"\1.fusion.query_term"),
    (re.compile(r"^(decoder\.\d+)\.cross_attn\.attn\.(.+)$"), r"\1.cross_attn.\2"),
    (re.compile(r"^(decoder\.\d+)\.cross_attn\.proj\.(.+)$"), r"\1.fusion.proj.\2"),
    (re.compile(r"^generator\.weight$"), "output.weight"),
)
_DROPPED_1 = re.compile(r"^decoder\.\d+\.cross_attn\.updates$")


def _weights_1_to_2(weights: dict[str, Any]) -> dict[str, Any]:
    """Renamed in the same order, so that an optimiser's state, kept by position,
    still fits."""
    out = {}
    for name, value in weights.items():
        for pattern, new in _RENAMED_1:
            name, found = pattern.subn(new, name)
            if found:
                break
        if not _DROPPED_1.match(name):
            out[name] = value
    return out


# version -> the step from it to the next
WEIGHT_STEPS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _weights_1_to_2}


def upgrade_checkpoint(payload: dict[str, Any], path: object) -> dict[str, Any]:
    """A loaded checkpoint's payload at today's :data:`VERSION` (its weights renamed
    step by step); a version this nmt does not know is an error naming ``path``."""
    version = payload.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= VERSION:
        raise NmtError(
            f"{path}: checkpoint format version {version!r} is not supported (this nmt "
            f"reads versions 1 to {VERSION})"
        )
    weights = payload.get("model")
    for step in range(version, VERSION):
        if isinstance(weights, dict):
            weights = WEIGHT_STEPS[step](weights)
    return {**payload, "version": VERSION, "model": weights}


# Options every earlier checkpoint stored for each encoder block and decoder kind,
# whichever was chosen, at their defaults where another one was.
_OTHER_KINDS = {
    ("encoder", "block", "qanet"): ("convs", "kernel", "survival"),
    ("decoder", "kind", "two_stream"): ("order",),
}


def upgrade_recipe(stored: Any) -> Any:
    """A recipe stored (in a checkpoint or a run directory) before trainers, encoder
    blocks and decoders had configs of their own, in today's layout: ``train.trainer``
    was a name with its options under ``train.scheduled_sampling``, a checkpoint
    held every block's and decoder's options whichever was chosen, and fusion was
    ``model.attention.fusion`` (now ``model.decoder.fusion``). Today's layout is
    returned as it is, so that such runs still load, resume and are reused by
    ``compare``."""
    if not isinstance(stored, dict):
        return stored
    data = copy.deepcopy(stored)
    train = data.get("train")
    if isinstance(train, dict) and (
        isinstance(train.get("trainer"), str) or "scheduled_sampling" in train
    ):
        kind = train.get("trainer", "teacher_forcing")
        options = train.pop("scheduled_sampling", None) or {}
        train["trainer"] = {"kind": kind, **(options if kind == "scheduled_sampling" else {})}
    model = data.get("model")
    attention = model.get("attention") if isinstance(model, dict) else None
    if isinstance(attention, dict) and "fusion" in attention:  # fusion became the decoder's
        fusion = attention.pop("fusion")
        if fusion != "none":
            decoder = model.setdefault("decoder", {})
            if isinstance(decoder, dict):
                decoder["fusion"] = fusion
        if not attention:
            del model["attention"]
    for (section, key, kind), keys in _OTHER_KINDS.items():
        part = model.get(section) if isinstance(model, dict) else None
        if isinstance(part, dict) and part.get(key) != kind:
            for name in keys:
                part.pop(name, None)
    return data
