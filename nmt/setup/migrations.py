"""What earlier versions wrote, brought to today's layout on load, in one place.

A checkpoint carries a format ``version``; each step below takes a checkpoint's
payload from one version to the next, and :func:`upgrade_checkpoint` applies
them in turn when a checkpoint loads (nmt.io.checkpoint). A recipe carries one
too (its ``version`` key): :func:`upgrade_recipe` takes it step by step to
:data:`RECIPE_VERSION`. A recipe that nmt stored before recipes had versions (in a
checkpoint, or ``recipe.yaml`` beside a run) is version 1; one that a user writes
without a version is today's, and a key of it in an earlier place is refused,
naming today's (:func:`refuse_moved_keys`). Every migration has a test that loads
what the earlier layout wrote (tests/setup/test_migrations.py).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from nmt.errors import NmtError

VERSION = 3  # the checkpoint format nmt writes today
RECIPE_VERSION = 2  # the recipe layout nmt writes today
# a study's results.json (for scripts that read it: nmt reads back none); the version
# goes up when a key changes its meaning or place, not when one is added
RESULTS_VERSION = 1

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


def _checkpoint_1_to_2(payload: dict[str, Any]) -> dict[str, Any]:
    """The weights renamed in the same order, so that an optimiser's state, kept by
    position, still fits."""
    weights = payload.get("model")
    if not isinstance(weights, dict):
        return payload
    out = {}
    for name, value in weights.items():
        for pattern, new in _RENAMED_1:
            name, found = pattern.subn(new, name)
            if found:
                break
        if not _DROPPED_1.match(name):
            out[name] = value
    return {**payload, "model": out}


def _checkpoint_2_to_3(payload: dict[str, Any]) -> dict[str, Any]:
    """Version 3 keeps the optimiser's state as its parts' (``{"parts": [...]}``,
    Muon's then Adam's); version 2 kept Adam's alone as Adam's own state dict."""
    state = payload.get("optimizer")
    if isinstance(state, dict) and "parts" not in state:
        return {**payload, "optimizer": {"parts": [state]}}
    return payload


Step = Callable[[dict[str, Any]], dict[str, Any]]
# version -> the step from it to the next
CHECKPOINT_STEPS: dict[int, Step] = {1: _checkpoint_1_to_2, 2: _checkpoint_2_to_3}


def _known(version: Any, today: int) -> bool:
    return isinstance(version, int) and not isinstance(version, bool) and 1 <= version <= today


def upgrade_checkpoint(payload: dict[str, Any], path: object) -> dict[str, Any]:
    """A loaded checkpoint's payload at today's :data:`VERSION`, step by step; a
    version this nmt does not know is an error naming ``path``."""
    version = payload.get("version")
    if not _known(version, VERSION):
        raise NmtError(
            f"{path}: checkpoint format version {version!r} is not supported (this nmt "
            f"reads versions 1 to {VERSION})"
        )
    for step in range(version, VERSION):
        payload = CHECKPOINT_STEPS[step](payload)
    return {**payload, "version": VERSION}


# Options every earlier checkpoint stored for each encoder block and decoder kind,
# whichever was chosen, at their defaults where another one was.
_OTHER_KINDS = {
    ("encoder", "block", "qanet"): ("convs", "kernel", "survival"),
    ("decoder", "kind", "two_stream"): ("order",),
}


def _recipe_1_to_2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 came before trainers, encoder blocks and decoders had configs of
    their own: ``train.trainer`` was a name with its options under
    ``train.scheduled_sampling``, a checkpoint held every block's and decoder's
    options whichever was chosen, and fusion was ``model.attention.fusion`` (now
    ``model.decoder.fusion``). Recipes that nmt stored before recipes had versions
    are version 1 whatever their keys, so each change applies only where its earlier
    key is there."""
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


# version -> the step from it to the next
RECIPE_STEPS: dict[int, Step] = {1: _recipe_1_to_2}


def upgrade_recipe(data: Any, where: str = "the run's recipe", stored: bool = True) -> Any:
    """A recipe at today's :data:`RECIPE_VERSION`, step by step from its ``version``:
    one that nmt ``stored`` without a version (before recipes had one) is version 1,
    one a user wrote without a version is today's. A version this nmt does not know
    is an error naming ``where``; a recipe of today's version that names a key in
    its earlier place is refused (:func:`refuse_moved_keys`)."""
    if not isinstance(data, dict):
        return data
    version = data.get("version", 1 if stored else RECIPE_VERSION)
    if not _known(version, RECIPE_VERSION):
        raise NmtError(
            f"{where}: version: {version!r} is not a recipe format this nmt reads "
            f"(versions 1 to {RECIPE_VERSION}; a newer nmt wrote it?)"
        )
    if version == RECIPE_VERSION:
        refuse_moved_keys(data, where)
        return {**data, "version": RECIPE_VERSION}
    data = copy.deepcopy(data)
    for step in range(version, RECIPE_VERSION):
        data = RECIPE_STEPS[step](data)
    return {**data, "version": RECIPE_VERSION}


def refuse_moved_keys(data: dict[str, Any], where: str) -> None:
    """Refuse a recipe of today's version that names a key in its earlier place,
    naming today's (a stored recipe of version 1 is upgraded instead)."""
    if isinstance(data.get("train"), dict) and "scheduled_sampling" in data["train"]:
        raise NmtError(
            f"{where}: train.scheduled_sampling: its options now go under train.trainer, "
            "beside kind: scheduled_sampling (docs/training.md)"
        )
    model = data.get("model")
    attention = model.get("attention") if isinstance(model, dict) else None
    if isinstance(attention, dict) and "fusion" in attention:
        raise NmtError(
            f"{where}: model.attention.fusion: fusion is now a decoder option that wraps "
            "any attention kind: set model.decoder.fusion instead"
        )
