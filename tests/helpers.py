"""Small builders shared by the tests."""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch
from hypothesis import strategies as st

from nmt.data.vocab import BOS, PAD
from nmt.io import checkpoint
from nmt.model.seq2seq import Transformer
from nmt.setup.attention import AttentionConfig
from nmt.setup.config import from_dict
from nmt.setup.model import ModelConfig
from nmt.setup.recipe import RunConfig
from nmt.training.build import build
from nmt.training.run import train
from nmt.training.signals import Interrupted
from nmt.training.trainer import Trainer

VOCAB = 40


def line_text(max_size: int) -> st.SearchStrategy[str]:
    """One line of any text but the line feed itself: CR, U+2028, NEL, control
    characters, emoji... (no lone surrogates, which UTF-8 cannot hold)."""
    chars = st.characters(blacklist_characters="\n", blacklist_categories=("Cs",))
    return st.text(chars, max_size=max_size)


def attention_config(kind: str, **options) -> AttentionConfig:
    return from_dict(ModelConfig, {"attention": {"kind": kind, **options}}).attention


def tiny_model(
    kind: str = "global", dropout: float = 0.0, model: dict | None = None, **options
) -> Transformer:
    """A small model; ``model`` overrides ModelConfig keys (e.g. ``encoder``),
    ``options`` are the cross-attention's."""
    cfg = from_dict(
        ModelConfig,
        {
            "d_model": 32,
            "heads": 4,
            "ffn": 64,
            "encoder_layers": 2,
            "decoder_layers": 2,
            "dropout": dropout,
            "max_positions": 512,
            **(model or {}),
        },
    )
    cfg = dataclasses.replace(cfg, attention=attention_config(kind, **options))
    return Transformer(cfg, VOCAB, VOCAB, PAD, share_embeddings=True)


def random_batch(lengths: list[int], generator: torch.Generator | None = None) -> torch.Tensor:
    """(B, max(lengths)) ids in [4, VOCAB), padded with PAD."""
    out = torch.full((len(lengths), max(lengths)), PAD, dtype=torch.long)
    for i, n in enumerate(lengths):
        out[i, :n] = torch.randint(4, VOCAB, (n,), generator=generator)
    return out


def noisy(refs: list[str], keep: float, seed: int) -> list[str]:
    """A system's output: each reference word kept with probability ``keep``, else "x"."""
    r = np.random.default_rng(seed)
    return [" ".join(w if r.random() < keep else "x" for w in ref.split()) for ref in refs]


def assert_incremental_equals_full(model: Transformer, cuts: Sequence[int]) -> None:
    """Decoding the target in the pieces between ``cuts`` (one position a step, as
    search decodes, or several after cached ones) gives the full pass's outputs."""
    src = random_batch([9, 5, 12])
    tgt = torch.cat([torch.full((3, 1), BOS), random_batch([10, 10, 10])], 1)
    if model.separators is not None:  # a sentence-group model: sentences on both sides
        src_sep, tgt_sep = model.separators
        src[:, 2] = src[0, 6] = src_sep
        tgt[:, 3] = tgt[1:, 7] = tgt_sep
    with torch.no_grad():
        memory, src_mask = model.encode(src)
        full = model.decode(tgt, model.decoder_state(memory, src_mask, src=src))
        state = model.decoder_state(memory, src_mask, incremental=True, src=src)
        steps = [model.decode(tgt[:, a:b], state) for a, b in itertools.pairwise(cuts)]
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-4)


class StopsAfterUpdate(Trainer):
    """A trainer that signals itself SIGTERM after update ``stop_at`` (1-based; None:
    never), as a scheduler would: the run saves last.pt and stops there."""

    stop_at: int | None = None

    def train_step(self, batches):
        out = super().train_step(batches)
        if self.state.step + 1 == self.stop_at:  # state.step counts it after this returns
            self.stop()
        return out

    def stop(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)


class Killed(BaseException):
    """What SIGKILL is to a process: it ends at once, and saves nothing on the way out."""


class DiesAfterUpdate(StopsAfterUpdate):
    """A trainer whose process dies outright after update ``stop_at``: no signal, so
    nothing is saved on the way out."""

    def stop(self) -> None:
        raise Killed


def straight_and_resumed(
    whole: RunConfig, stopped: RunConfig, stop_at: int, trainer: type[Trainer] = StopsAfterUpdate
) -> tuple[dict, dict]:
    """The last.pt of ``whole`` trained straight through, and of ``stopped`` (the same
    recipe in another run directory) signalled after update ``stop_at`` by ``trainer``
    (a StopsAfterUpdate), then resumed to the end."""
    train(whole, device="cpu")
    interrupted = trainer(*build(stopped, print))
    interrupted.stop_at = stop_at
    try:
        interrupted.run()
    except Interrupted:
        pass
    else:
        raise AssertionError(f"the run did not stop after update {stop_at}")
    train(stopped, device="cpu", resume=True)
    return tuple(checkpoint.load(f"{c.run_dir}/last.pt") for c in (whole, stopped))


class Heard:
    """A progress listener that keeps what it hears."""

    def __init__(self) -> None:
        self.plans: list[tuple[int, int]] = []
        self.batches: list[tuple[int, int]] = []

    def planned(self, sentences: int, work: int) -> None:
        self.plans.append((sentences, work))

    def done(self, sentences: int, work: int = 0) -> None:
        self.batches.append((sentences, work))

    def plan(self) -> tuple[int, int]:
        """The one plan heard, (sentences, work), once the batches done add up to it."""
        ((sentences, work),) = self.plans
        assert sum(s for s, _ in self.batches) == sentences, (self.plans, self.batches)
        assert sum(w for _, w in self.batches) == work, (self.plans, self.batches)
        return sentences, work


def script_module(script: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A script (benchmarks/, scripts/) as a module, imported as ``python script.py``
    runs it (its directory on the path; ``main`` is what its last line calls); its
    module is gone from sys.modules after the test."""
    monkeypatch.syspath_prepend(str(script.parent))
    spec = importlib.util.spec_from_file_location(script.stem, script)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, script.stem, module)  # dataclasses look it up there
    spec.loader.exec_module(module)
    return module
