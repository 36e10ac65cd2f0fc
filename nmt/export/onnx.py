"""``nmt export --format onnx``: a model as two ONNX graphs and a decoding loop that
runs them with onnxruntime, without nmt or torch (the ``onnx`` extra exports).

``start.onnx`` encodes a batch of sources and takes the first decoder step;
``step.onnx`` takes each later step on the decoder's state: the projected encoder
memory and the caches of every layer's sub-modules (nmt.model.layers.Caches),
passed in and out as flat, named tensors with their batch rows first. The two
graphs are the model's own incremental decoding, traced by ``torch.export`` with
the batch, source and target lengths left symbolic; the loop
(nmt.export.onnx_loop, copied into the export as ``translate.py``) is nmt's search.

The legacy TorchScript exporter is not used: it bakes the traced shapes in as
numbers, and its graphs give wrong log-probabilities at any other shape without an
error. Every export is therefore run once by onnxruntime at shapes it was not traced
at and compared with the model (:data:`TOLERANCE`); a graph that differs, or a model
``torch.export`` cannot trace, is refused with the reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import Tensor, nn

from nmt import install_hint
from nmt.attention.base import Memory
from nmt.data.vocab import BOS, EOS, PAD
from nmt.errors import NmtError, brief
from nmt.export.ctranslate2 import published_name, refuse_occupied, write_directory
from nmt.io.files import write_text
from nmt.model.decoder import DecoderState
from nmt.model.load import Loaded, load_model
from nmt.model.seq2seq import Transformer
from nmt.setup.decoding import DecodeConfig

# The most |Δ log-probability| allowed between onnxruntime's graphs and the model, at
# shapes the graphs were not traced at (kernels that sum in another order differ by
# float32 rounding, far below this; the differences found: nmt-export.json)
TOLERANCE = 1e-4
OPSET = 18


def obstacle(loaded: Loaded) -> str | None:
    """Why the ONNX export cannot reproduce ``nmt translate`` for this run, or None."""
    m, d = loaded.cfg.model, loaded.cfg.decode
    if m.decoder.group_layers:
        return (
            "model.decoder.group_layers is set: a sentence-group model reads its input "
            "cut into sentences by nmt's rules, which the portable loop does not carry"
        )
    if d.coverage:
        return (
            f"decode.coverage is {d.coverage}: the coverage penalty reads the "
            "cross-attention weights, which the step graph does not return"
        )
    if d.remedies:
        kinds = ", ".join(r.kind for r in d.remedies)
        return f"decode.remedies holds {kinds}: the portable loop applies nmt's built-in ones only"
    return None


def flat(state: DecoderState) -> dict[str, Tensor]:
    """A decoder state as named tensors: ``memory.L.FIELD`` then
    ``cache.L.MODULE.KEY`` (each layer's cache sub-modules and keys sorted)."""
    out = {
        f"memory.{i}.{field}": tensor
        for i, memory in enumerate(state.memories)
        for field, tensor in zip(Memory._fields, memory)
    }
    for i, caches in enumerate(state.caches or []):
        for module in sorted(caches):
            for key in sorted(caches[module]):
                out[f"cache.{i}.{module}.{key}"] = caches[module][key]
    return out


def unflat(names: list[str], tensors: tuple[Tensor, ...], model: Transformer) -> DecoderState:
    """The decoder state that :func:`flat` wrote, in ``model``'s decoder's cache
    layout; its offset is the length of the first self-attention cache (a symbolic
    size in the traced graph)."""
    memories: list[dict[str, Tensor]] = [{} for _ in model.decoder]
    caches = model.decoder.new_caches()
    for name, tensor in zip(names, tensors):
        part, layer, *rest = name.split(".")
        if part == "memory":
            memories[int(layer)][rest[0]] = tensor
        else:
            caches[int(layer)].setdefault(rest[0], {})[rest[1]] = tensor
    if "self_attn" not in caches[0]:
        raise NmtError(
            "the decoder keeps no self-attention cache in its first layer to count steps"
        )
    offset = caches[0]["self_attn"]["key"].size(2)
    return DecoderState([Memory(**m) for m in memories], caches, offset)


class Start(nn.Module):
    """src (B,S) -> log-probabilities of the first target piece (B,V), then the
    decoder state's tensors in :func:`flat`'s order."""

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, src: Tensor) -> tuple[Tensor, ...]:
        state, logp = first_step(self.model, src)
        return (logp, *flat(state).values())


class Step(nn.Module):
    """The last pieces (N,1) and the state's tensors ``names`` -> the next
    log-probabilities (N,V), then the new caches (the ``cache.`` names, in order)."""

    def __init__(self, model: Transformer, names: list[str]) -> None:
        super().__init__()
        self.model, self.names = model, names

    def forward(self, last: Tensor, *state: Tensor) -> tuple[Tensor, ...]:
        decoder = unflat(self.names, state, self.model)
        logp = next_logp(self.model, last, decoder)
        return (logp, *(t for n, t in flat(decoder).items() if n.startswith("cache.")))


def first_step(model: Transformer, src: Tensor) -> tuple[DecoderState, Tensor]:
    """Encode src (B,S) and decode ``<s>``: the state after it and its log-probabilities
    (B,V)."""
    memory, src_mask = model.encode(src)
    state = model.decoder_state(memory, src_mask, incremental=True, src=src)
    return state, next_logp(model, torch.full_like(src[:, :1], BOS), state)


def next_logp(model: Transformer, last: Tensor, state: DecoderState) -> Tensor:
    """The log-probabilities (N,V) after ``last`` (N,1), as search computes them."""
    logits, _ = model.decode_step(last, state)
    return torch.log_softmax(logits[:, -1].float(), dim=-1)


def source_vocab(model: Transformer) -> int:
    return model.src_embed.tokens.num_embeddings


def example_source(batch: int, length: int, vocab: int, seed: int) -> Tensor:
    """Random source ids (batch, length) ending in EOS, the last row padded to half
    the length, so that traced graphs and checks meet padding."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, max(5, vocab - 1), (batch, length), generator=g)
    src[:, -1] = EOS
    half = max(1, length // 2)
    src[-1, half:] = PAD
    src[-1, half - 1] = EOS
    return src


def state_after(model: Transformer, batch: int, length: int, steps: int) -> dict[str, Tensor]:
    """The flat state after ``steps`` decoder steps on an example source."""
    state, _ = first_step(model, example_source(batch, length, source_vocab(model), 0))
    for _ in range(steps - 1):
        next_logp(model, torch.full((batch, 1), EOS), state)
    return flat(state)


def symbolic_axes(model: Transformer) -> dict[str, dict[int, str]]:
    """Which axis of each state tensor is the batch (B), the source length (S) or
    the steps decoded (T): the axes whose size follows each when it alone changes."""
    base = state_after(model, 2, 7, 2)
    varied = {"B": state_after(model, 3, 7, 2), "S": state_after(model, 2, 9, 2)}
    varied["T"] = state_after(model, 2, 7, 3)
    axes: dict[str, dict[int, str]] = {}
    for name, tensor in base.items():
        axes[name] = {}
        for axis, size in enumerate(tensor.shape):
            moved = [dim for dim, state in varied.items() if state[name].shape[axis] != size]
            if len(moved) > 1:
                raise NmtError(f"state tensor {name}'s axis {axis} follows {' and '.join(moved)}")
            if moved:
                axes[name][axis] = moved[0]
        if axes[name].get(0) != "B":
            raise NmtError(f"state tensor {name} does not hold its batch rows first")
    return axes


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The exporter's warnings and log lines (unused kernels, deprecations) kept off
    the user's terminal; its errors still raise."""
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._export")]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)


def export_graphs(model: Transformer, tmp: Path) -> tuple[list[str], list[str]]:
    """Write start.onnx and step.onnx into ``tmp``; the state's names and the names
    of what the step returns after the log-probabilities."""
    from torch.export import Dim

    axes = symbolic_axes(model)
    dims = {"B": Dim("B", min=1), "S": Dim("S", min=2), "T": Dim("T", min=1)}
    names = list(axes)
    carried = [n for n in names if n.startswith("cache.")]
    src = example_source(2, 7, source_vocab(model), 0)
    state = state_after(model, 2, 7, 2)
    step_shapes = tuple({a: dims[d] for a, d in axes[n].items()} for n in names)
    with quiet():
        torch.onnx.export(
            Start(model),
            (src,),
            str(tmp / "start.onnx"),
            dynamo=True,
            external_data=False,  # one file per graph (protobuf holds up to 2 GB)
            verbose=False,
            opset_version=OPSET,
            dynamic_shapes=({0: dims["B"], 1: dims["S"]},),
            input_names=["src"],
            output_names=["logp", *names],
        )
        torch.onnx.export(
            Step(model, names),
            (torch.full((2, 1), EOS), *state.values()),
            str(tmp / "step.onnx"),
            dynamo=True,
            external_data=False,  # one file per graph (protobuf holds up to 2 GB)
            verbose=False,
            opset_version=OPSET,
            dynamic_shapes=({0: dims["B"]}, step_shapes),
            input_names=["last", *names],
            output_names=["logp", *(f"next.{n}" for n in carried)],
        )
    return names, carried


def difference(model: Transformer, tmp: Path, names: list[str], carried: list[str]) -> float:
    """The most |Δ log-probability| between the graphs, run by onnxruntime, and the
    model, over a start and three steps at a batch and lengths not traced."""
    import onnxruntime as ort

    start = ort.InferenceSession(str(tmp / "start.onnx"))
    step = ort.InferenceSession(str(tmp / "step.onnx"))
    src = example_source(3, 11, source_vocab(model), 1)
    state, logp = first_step(model, src)
    got, *tensors = start.run(None, {"src": src.numpy()})
    worst = float((torch.from_numpy(got) - logp).abs().max())
    feed = dict(zip(names, tensors))
    g = torch.Generator().manual_seed(2)
    for _ in range(3):
        last = torch.randint(4, model.output.out_features, (3, 1), generator=g)
        logp = next_logp(model, last, state)
        got, *tensors = step.run(None, {"last": last.numpy(), **feed})
        worst = max(worst, float((torch.from_numpy(got) - logp).abs().max()))
        feed.update(zip(carried, tensors))
    return worst


def exportable(loaded: Loaded) -> Transformer:
    """The model with ``model.attention.path`` dense where it has one: the banded
    path of local attention computes the same weights (nmt.attention.bands) with a
    band width read to the host, which ``torch.export`` cannot trace."""
    attention = loaded.cfg.model.attention
    if getattr(attention, "path", "dense") == "dense":
        return loaded.model
    cfg = dataclasses.replace(
        loaded.cfg.model, attention=dataclasses.replace(attention, path="dense")
    )
    model = Transformer(
        cfg,
        loaded.model.src_embed.tokens.num_embeddings,
        loaded.model.output.out_features,
        PAD,
        loaded.model.src_embed is loaded.model.tgt_embed,
    )
    model.load_state_dict(loaded.model.state_dict())
    return model.eval()


def search_settings(decode: DecodeConfig) -> dict[str, float]:
    """The decode keys the loop applies (its ``Search`` fields): the coverage penalty
    and registered remedies make an export refuse (:func:`obstacle`); split, short
    and n_best are nmt translate's own."""
    from nmt.export.onnx_loop import Search

    return {f.name: getattr(decode, f.name) for f in dataclasses.fields(Search)}


def export_onnx(checkpoint: Path, out_dir: Path) -> Path:
    """Write ``out_dir``: ``start.onnx``, ``step.onnx``, the SentencePiece models
    ``source.spm`` and ``target.spm``, ``translate.py`` (the loop that runs them) and
    ``nmt-export.json`` (the state's layout and the run's search settings). Built
    beside ``out_dir`` and renamed into place: a failed export leaves nothing."""
    try:
        import onnxruntime  # noqa: F401
        import onnxscript  # noqa: F401
    except ImportError:
        raise NmtError(f"ONNX export needs the onnx extra: {install_hint('onnx')}") from None
    refuse_occupied(out_dir)
    loaded = load_model(checkpoint, torch.device("cpu"))
    if (why := obstacle(loaded)) is not None:
        raise NmtError(f"{checkpoint}: not exported: {why}")
    model = exportable(loaded)

    def fill(tmp: Path) -> None:
        with torch.no_grad():
            try:
                names, carried = export_graphs(model, tmp)
            except NmtError as e:
                raise NmtError(f"{checkpoint}: not exported: {e}") from None
            except Exception as e:
                cause = e.__cause__ or e  # torch.onnx wraps the tracer's own error
                why = f"torch.export failed ({type(cause).__name__}: {brief(cause)})"
                raise NmtError(f"{checkpoint}: not exported: {why}") from None
            worst = difference(model, tmp, names, carried)
        if not worst <= TOLERANCE:
            raise NmtError(
                f"{checkpoint}: not exported: onnxruntime's log-probabilities differ from "
                f"the model's by {worst:.3g} at shapes not traced (at most {TOLERANCE})"
            )
        (tmp / "source.spm").write_bytes(loaded.vocabs.src.model)
        (tmp / "target.spm").write_bytes(loaded.vocabs.tgt.model)
        shutil.copyfile(Path(__file__).with_name("onnx_loop.py"), tmp / "translate.py")
        manifest = {
            "format": "onnx",
            "opset": OPSET,
            "torch_version": torch.__version__,
            "checkpoint": published_name(checkpoint),
            "max_positions": loaded.cfg.model.max_positions,
            "search": search_settings(loaded.cfg.decode),
            "state": names,
            "carried": carried,
            "largest_difference": worst,
            "usage": "python translate.py DIR [--beam K] < source.txt > output.txt; "
            "or: from translate import Translator; Translator(DIR).translate(lines)",
        }
        write_text(tmp / "nmt-export.json", json.dumps(manifest, indent=2) + "\n")

    write_directory(out_dir, fill)
    return out_dir
