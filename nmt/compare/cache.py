"""A run's attention figures kept beside it, so that a report written again reads no
model.

Reading a run's cross-attention on a split (twice: with the references and with
its own translations) is most of what ``nmt compare`` does once the runs are
decoded; a report is written again whenever the study command runs again (a contrast
added, a significance test changed, a run added). Each split's figures are kept in
``RUN/analysis/NAME.{refs,hyps}.npz`` under a key: a digest of all they were computed
from (the checkpoint's bytes, the lines read, the heatmap lines, the device kind, and
the source of the code that computes them: the model's modules, plug-ins' included,
and the analysis'). A file whose key differs, or that cannot be read, is computed
again and replaced; nothing stale is ever used.

Files hold arrays only (``numpy.load(allow_pickle=False)``): a damaged or foreign
file can make the analysis compute again, never run code.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import io
import json
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nmt.inspection.maps import AttentionMap
from nmt.io.files import atomic_write
from nmt.progress import warn

DIRECTORY = "analysis"  # in the run directory
KEY = "__key__"  # the array that holds a file's key

# the modules beside the model's whose code makes the figures
ANALYSIS_MODULES = (
    "nmt.compare.analysis",
    "nmt.inspection.diagnostics",
    "nmt.inspection.maps",
    "nmt.decoding.search",
    "nmt.data.alignment",
)


def file_digest(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


@functools.cache
def source_digest(modules: frozenset[str]) -> str:
    """A digest of the source files of ``modules`` (names in sys.modules): a change to
    the code that computes the figures changes every key."""
    h = hashlib.sha256()
    for name in sorted(modules):
        try:
            path = inspect.getsourcefile(sys.modules[name])
        except (KeyError, TypeError):  # built in, or gone: its name stands for it
            path = None
        h.update(name.encode() + b"\0" + (Path(path).read_bytes() if path else b""))
    return h.hexdigest()


@dataclass(frozen=True)
class FigureCache:
    """Where one run's figures are kept, and what every key of it starts from: the
    checkpoint, the device kind and the code."""

    directory: Path
    origin: str

    @classmethod
    def of(
        cls, run_dir: Path, checkpoint: Path, model: torch.nn.Module, device: torch.device
    ) -> FigureCache:
        modules = {type(m).__module__ for m in model.modules()} | set(ANALYSIS_MODULES)
        origin = [file_digest(checkpoint), device.type, source_digest(frozenset(modules))]
        return cls(run_dir / DIRECTORY, json.dumps(origin))

    def key(self, *parts: Any) -> str:
        text = json.dumps([self.origin, *parts], sort_keys=True, default=sorted_list)
        return hashlib.sha256(text.encode()).hexdigest()

    def computed(self, name: str, key: str, compute: Callable[[], Any], kind: Codec) -> Any:
        """``compute()``'s value, from ``DIRECTORY/NAME.npz`` where its key is ``key``;
        else computed and kept there."""
        path = self.directory / f"{name}.npz"
        arrays = read_arrays(path, key)
        if arrays is not None:
            return kind.decode(arrays)
        value = compute()
        stored = kind.encode(value) | {KEY: np.array(key)}
        self.directory.mkdir(exist_ok=True)
        atomic_write(path, lambda f: f.write(npz_bytes(stored)))
        return value


def sorted_list(value: Any) -> Any:
    """JSON for what json cannot write itself: sets (gold alignments) as sorted lists."""
    if isinstance(value, set | frozenset):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} in an analysis key")


def read_arrays(path: Path, key: str) -> dict[str, np.ndarray] | None:
    """The arrays of ``path`` where its key is ``key``; None where there is no such
    file or it was computed from something else; a file that cannot be read is said in
    one line and treated as missing."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            if str(f[KEY]) != key:
                return None
            return {k: f[k] for k in f.files if k != KEY}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        warn(f"{path}: damaged ({type(e).__name__}), computed again")
        return None


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


@dataclass(frozen=True)
class Codec:
    """How a value becomes named arrays and back."""

    encode: Callable[[Any], dict[str, np.ndarray]]
    decode: Callable[[dict[str, np.ndarray]], Any]


def prefixed(arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {k.removeprefix(prefix): v for k, v in arrays.items() if k.startswith(prefix)}


def encode_references(value: tuple[dict[str, float], dict[int, AttentionMap]]) -> dict:
    attention, maps = value
    out = {f"attention/{k}": np.array(v) for k, v in attention.items()}
    for i, m in maps.items():
        out |= {f"map/{i}/src": np.array(m.src), f"map/{i}/tgt": np.array(m.tgt)}
        out[f"map/{i}/weights"] = m.weights
        if m.centers is not None:
            out[f"map/{i}/centers"] = m.centers
    return out


def decode_references(arrays: dict) -> tuple[dict[str, float], dict[int, AttentionMap]]:
    attention = {k: float(v) for k, v in prefixed(arrays, "attention/").items()}
    drawn = prefixed(arrays, "map/")
    lines = sorted({int(k.split("/")[0]) for k in drawn})
    maps = {
        i: AttentionMap(
            [str(p) for p in drawn[f"{i}/src"]],
            [str(p) for p in drawn[f"{i}/tgt"]],
            drawn[f"{i}/weights"],
            drawn.get(f"{i}/centers"),
        )
        for i in lines
    }
    return attention, maps


def encode_outputs(value: tuple[dict[str, np.ndarray], np.ndarray | None]) -> dict:
    sentences, captions = value
    out = {f"sentences/{k}": v for k, v in sentences.items()}
    return out | ({"captions": captions} if captions is not None else {})


def decode_outputs(arrays: dict) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    return prefixed(arrays, "sentences/"), arrays.get("captions")


REFERENCES = Codec(encode_references, decode_references)
OUTPUTS = Codec(encode_outputs, decode_outputs)
