"""What is measured on every finished run: scores and per-sentence BLEU statistics of
each split, training and decoding cost, and what its cross-attention looks like."""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from nmt.compare.cache import OUTPUTS, REFERENCES, FigureCache
from nmt.compare.metrics import text_metrics
from nmt.data.alignment import Alignment, aer, read_alignments
from nmt.data.corpus import n_lines, read_documents, read_lines
from nmt.data.pipeline import load_split, split_files
from nmt.data.splits import IN_DOCUMENTS, JOINED, base_split, groups, needs_documents
from nmt.decoding.evaluate import read_results
from nmt.decoding.metrics import corpus_score, sentence_stats
from nmt.decoding.search import encode_source
from nmt.errors import ConfigError, NmtError
from nmt.inspection.diagnostics import (
    backward,
    caption_covered,
    center_distance,
    chrf_recall,
    diagonal,
    dropped,
    ratio,
    word_accuracy,
    word_counts,
)
from nmt.inspection.maps import (
    AttentionMap,
    attention_entropy,
    each_attention_map,
    supervised_heads,
    word_alignment,
)
from nmt.model.load import Loaded, load_model
from nmt.progress import warn
from nmt.setup.config import read_yaml
from nmt.setup.data import DataConfig
from nmt.setup.decoding import evaluation_name
from nmt.setup.recipe import RunConfig, config_from_dict
from nmt.training.run import read_summary
from nmt.training.state import read_metrics


@dataclass
class SplitAnalysis:
    bleu: float
    chrf: float
    signatures: dict[str, str]
    sentences_per_s: float  # decoding, with the recipe's beam
    hyps: list[str]  # the run's translations, for sacreBLEU's paired tests
    refs: list[str]
    stats: np.ndarray  # (N, 10) sentence BLEU statistics, for resampling and buckets
    src_words: np.ndarray  # (N,) source length in words, for the length buckets
    attention: dict[str, float]  # entropy, peak_distance, [center_spread, center_distance], [aer]
    src: list[str] = field(default_factory=list)
    # per sentence (N,2) numerator and denominator of each figure measured per sentence
    # (nmt.compare.metrics) but the length ratio, which is read from stats
    sentences: dict[str, np.ndarray] = field(default_factory=dict)
    words: np.ndarray | None = None  # (buckets, 3) diagnostics.word_accuracy counts
    maps: dict[int, AttentionMap] = field(default_factory=dict)  # lines to draw
    # a joined split's (N,K,2): per sentence and caption, the covered share of the
    # caption's source words and chrF recall of its reference (diagnostics); else None
    captions: np.ndarray | None = None
    # a joined split's drawn lines: the words of each of their captions
    caption_words: dict[int, list[int]] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)  # more corpus scores: chrf++, ter


@dataclass
class RunAnalysis:
    variant: str
    seed: int
    run_dir: Path
    params: int | None  # None: analysed without its checkpoint
    train: dict[str, float]  # steps, seconds, tokens_per_s
    curve: list[dict[str, float]]  # dev scores: step, elapsed, valid_bleu / valid_loss
    splits: dict[str, SplitAnalysis]


def training_figures(run_dir: Path) -> tuple[dict[str, float], list[dict[str, float]]]:
    """Steps, training seconds and tokens/s (from summary.json, or the metrics log of an
    older run), and the dev curve from metrics.jsonl."""
    path = run_dir / "metrics.jsonl"
    records, damaged = read_metrics(path)
    if damaged:  # resuming rewrites the log whole: a finished run's damage is real
        numbers = ", ".join(map(str, damaged[:5])) + (", …" if len(damaged) > 5 else "")
        word = "line" if len(damaged) == 1 else "lines"
        warn(f"{path}: {word} {numbers} damaged, left out of the run's figures")
    curve = [
        {k: r[k] for k in ("step", "elapsed", "valid_bleu", "valid_loss") if k in r}
        for r in records
        if "valid_loss" in r
    ]
    try:
        s = read_summary(run_dir)
    except NmtError as e:
        warn(f"{e}; the training figures come from metrics.jsonl")
        s = None
    if s is not None:
        train = {"steps": s["steps"], "seconds": s["elapsed_s"], "tokens_per_s": s["tokens_per_s"]}
        if isinstance(s.get("where"), dict):  # runs from before it was recorded have none
            train["where"] = s["where"]
        if isinstance(s.get("tracker_failures"), dict):
            train["tracker_failures"] = s["tracker_failures"]
    else:
        rates = [r["tokens_per_s"] for r in records if "tokens_per_s" in r]
        train = {
            "steps": max((r.get("step", 0) for r in records), default=0),
            "seconds": max((r.get("elapsed", 0.0) for r in records), default=0.0),
            "tokens_per_s": float(np.mean(rates)) if rates else 0.0,
        }
    return train, curve


def attention_figures(
    loaded: Loaded,
    src: list[str],
    refs: list[str],
    gold: list[Alignment] | None,
    keep: tuple[int, ...],
) -> tuple[dict[str, float], dict[int, AttentionMap]]:
    """Cross-attention while the model reads the references (teacher forcing).

    entropy: mean entropy (nats) of each layer's, head's and target position's
    distribution over source pieces. peak_distance: mean |argmax_s − d_t| in source
    pieces, d_t = t·(S−1)/(T−1) the diagonal. center_spread: standard deviation of the
    predicted centres' offsets p_t − d_t (local variants). center_distance: mean
    |p_t − aligned position| (diagnostics.center_distance: gold links where given,
    else the diagonal). aer: alignment error rate of the argmax word alignment of the
    layer- and head-averaged attention (gold given).
    """
    limit = loaded.model.cfg.max_positions - 1
    src_ids = encode_source(loaded.vocabs.src, src, limit)
    tgt_ids = encode_source(loaded.vocabs.tgt, refs, limit)
    entropy, distance, offsets, misses, predicted, maps = [], [], [], [], {}, {}
    v = loaded.vocabs
    for i, amap in each_attention_map(
        loaded.model, v.src, v.tgt, src_ids, tgt_ids, range(len(src))
    ):
        w = amap.weights  # (L,H,T,S)
        T, S = w.shape[-2:]
        diag = diagonal(T, S)  # (T,)
        entropy.append(attention_entropy(w))
        distance.append(float(np.abs(w.argmax(-1) - diag).mean()))
        if amap.centers is not None:
            offsets.append((amap.centers - diag).ravel())  # (L·Hc·T,)
            misses.append(center_distance(amap, gold[i] if gold is not None else None))
        if gold is not None:
            predicted[i] = word_alignment(amap, supervised_heads(loaded.cfg))
        if i in keep:
            maps[i] = amap
    figures = {"entropy": float(np.mean(entropy)), "peak_distance": float(np.mean(distance))}
    if offsets:
        figures["center_spread"] = float(np.concatenate(offsets).std())
        figures["center_distance"] = ratio(np.array(misses, dtype=np.float64))
    if gold is not None:
        figures["aer"] = aer([predicted[i] for i in range(len(src))], gold)
    return figures, maps


def output_figures(
    loaded: Loaded, src: list[str], hyps: list[str], parts: Captions | None = None
) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """Per sentence, the diagnostics read while the model reads its own translations
    (the attention it paid when it wrote them): dropped source words and backward
    moves of the attention's peak (nmt.inspection.diagnostics), each (N,2); on a joined
    split (``parts``: its captions), each caption's covered share and recall
    (N,K,2)."""
    limit = loaded.model.cfg.max_positions - 1
    v = loaded.vocabs
    src_ids, hyp_ids = encode_source(v.src, src, limit), encode_source(v.tgt, hyps, limit)
    out: dict[str, dict[int, tuple[float, float]]] = {"dropped": {}, "backward": {}}
    captions = {}
    for i, amap in each_attention_map(
        loaded.model, v.src, v.tgt, src_ids, hyp_ids, range(len(src))
    ):
        out["dropped"][i] = dropped(amap)
        out["backward"][i] = backward(amap)
        if parts is not None:
            counts = [len(line.split()) for line in parts.src[i]]
            recall = [chrf_recall(hyps[i], ref) for ref in parts.refs[i]]
            figures = np.stack([caption_covered(amap, counts), recall], -1)  # (k,2)
            captions[i] = padded(figures, parts.k)  # (K,2)
    order = range(len(src))  # each_attention_map's is by length
    pairs = {
        key: np.array([p[i] for i in order], dtype=np.float64).reshape(-1, 2)
        for key, p in out.items()
    }
    return pairs, np.stack([captions[i] for i in order]) if captions else None


def padded(figures: np.ndarray, k: int) -> np.ndarray:
    """A line's (k,2) figures of its k sentences as (K,2), NaN for the sentences a
    document's shorter last group lacks (``NAME~K``)."""
    return np.concatenate([figures, np.full((k - len(figures), 2), np.nan)])


def text_figures(text: SplitText) -> dict[str, np.ndarray]:
    """Per sentence, the (N,2) pairs of each metric of the translations alone
    (nmt.compare.metrics.TextMetric: repetition, and those of plug-ins)."""
    return {
        m.key: np.array(
            [m.pair(h, r, s) for h, r, s in zip(text.hyps, text.refs, text.src)], np.float64
        ).reshape(-1, 2)
        for m in text_metrics()
    }


def text_captions(hyps: list[str], parts: Captions | None) -> np.ndarray | None:
    """The per-caption figures of :func:`output_figures` without the model: on a
    joined split each caption's recall, its covered share NaN (not read)."""
    if parts is None:
        return None
    recall = np.array(
        [
            [chrf_recall(h, ref) for ref in refs] + [np.nan] * (parts.k - len(refs))
            for h, refs in zip(hyps, parts.refs)
        ],
        np.float64,
    )  # (N,K)
    return np.stack([np.full_like(recall, np.nan), recall], -1)  # (N,K,2)


@dataclass(frozen=True)
class Captions:
    """The captions (or a document's sentences) of a joined split (``NAME*K``,
    ``NAME~K``, K ≥ 2): per joined line, the source lines and the references it was
    made of, K of each (fewer for a document's last group)."""

    src: list[list[str]]
    refs: list[list[str]]
    k: int


def joined_k(split: str) -> int:
    """The K of a joined split (``NAME*K``, ``NAME~K``), else 0."""
    joined = JOINED.fullmatch(split) or IN_DOCUMENTS.fullmatch(split)
    return int(joined.group("k")) if joined else 0


def joined_captions(data: DataConfig, split: str) -> Captions | None:
    """The captions of ``split`` if it joins K ≥ 2 lines of its base split, else None."""
    if (k := joined_k(split)) < 2:
        return None
    base = base_split(split)
    src, refs = load_split(data, base)
    docs = read_documents(data.dir, base, len(src)) if needs_documents(split) else None
    made = groups(split, len(src), docs) or []
    return Captions([[src[i] for i in g] for g in made], [[refs[i] for i in g] for g in made], k)


@functools.cache
def training_word_counts(path: Path) -> Counter[str]:
    """13a-token counts of a training target file, for word accuracy by frequency."""
    return word_counts(read_lines(path))


def heatmap_lines(n: int, split: str, heatmaps: tuple[int, ...]) -> tuple[int, ...]:
    """The lines of the ``n``-th split drawn for every variant: the spec's heatmaps in
    the first split, and the first line of each joined split (``NAME*K``, K ≥ 2), so
    that a reader sees how each variant reads a long input."""
    if n == 0:
        return heatmaps
    return (0,) if joined_k(split) >= 2 else ()


def read_gold(data: DataConfig, split: str, sentences: int) -> list[Alignment] | None:
    """The split's gold word alignments (``{split}.align`` beside it, as the toy corpus
    has), None without; a malformed line, or another number of lines than the split's
    sentences (AER would pair other sentences), is an error naming the file."""
    path = Path(data.dir) / f"{split}.align"
    if not path.is_file():
        return None
    gold = read_alignments(path)
    if len(gold) != sentences:
        raise NmtError(f"{path}: {n_lines(len(gold))}, but {split} has {sentences:,}")
    return gold


@dataclass(frozen=True)
class Wanted:
    """What a study reads from each of its runs: the test splits, the lines of each
    drawn as heatmaps (by their index in ``splits``), and sacreBLEU's corpus scores
    beside BLEU and chrF, such as chrf++ and ter."""

    splits: tuple[str, ...]
    heatmaps: tuple[int, ...] = ()
    scores: tuple[str, ...] = ()


def analyse_run(
    variant: str,
    seed: int,
    run_dir: Path,
    wanted: Wanted,
    device: torch.device,
    tag: str = "",
    read: dict[str, dict[str, float]] | None = None,
) -> RunAnalysis:
    """Everything the report needs from one evaluated run (``tag``: from another
    decoding of it, ``SPLIT@TAG``; its heatmaps, read with the references, would be
    the run's own, so none are kept). ``read``: the run's attention figures
    per split where they are known already: they are read while the model reads the
    references, so another decoding of the run has the same. A run without
    ``best.pt`` (pruned, or brought back from a cluster without its checkpoints) is
    analysed from its translations alone: the figures that read the model's
    attention are left out (None). What reads the model is kept in RUN/analysis/ for
    the next report (nmt.compare.cache)."""
    checkpoint = run_dir / "best.pt"
    loaded = load_model(checkpoint, device) if checkpoint.is_file() else None
    cfg = loaded.cfg if loaded is not None else recipe_of(run_dir)
    results = read_results(run_dir)
    train, curve = training_figures(run_dir)
    counts = training_word_counts(split_files(cfg.data, cfg.data.train)[1])
    cache = None if loaded is None else FigureCache.of(run_dir, checkpoint, loaded.model, device)
    out = {}
    for n, split in enumerate(wanted.splits):
        name = evaluation_name(split, tag)
        text = SplitText.read(cfg.data, split, run_dir / f"{name}.hyp")
        keep = () if tag else heatmap_lines(n, split, wanted.heatmaps)
        known = None if read is None else read.get(split)
        kept = None if cache is None else (cache, split, name)
        attention, maps, sentences, captions = run_figures(loaded, text, keep, known, kept)
        r = results[name]
        more = {m: corpus_score(m, text.hyps, [text.refs]) for m in wanted.scores}
        out[split] = SplitAnalysis(
            bleu=r["bleu"],
            chrf=r["chrf"],
            signatures={m: r[f"{m}_signature"] for m in ("bleu", "chrf")}
            | {m: score.signature for m, score in more.items()},
            scores={m: score.score for m, score in more.items()},
            sentences_per_s=r["sentences_per_s"],
            hyps=text.hyps,
            refs=text.refs,
            stats=sentence_stats(text.hyps, text.refs),
            src_words=np.array([len(s.split()) for s in text.src]),
            attention=attention,
            src=text.src,
            sentences=sentences,
            words=word_accuracy(text.hyps, text.refs, counts),
            maps=maps,
            captions=captions,
            caption_words={
                i: [len(line.split()) for line in text.parts.src[i]] for i in maps if text.parts
            },
        )
    params = None if loaded is None else sum(p.numel() for p in loaded.model.parameters())
    return RunAnalysis(variant, seed, run_dir, params, train, curve, out)


@dataclass(frozen=True)
class SplitText:
    """A test split as a run's analysis reads it: sources, references, the run's
    translations, the gold alignments where the corpus has them, and a joined split's
    captions."""

    src: list[str]
    refs: list[str]
    hyps: list[str]
    gold: list[Alignment] | None
    parts: Captions | None

    @classmethod
    def read(cls, data: DataConfig, split: str, hyp: Path) -> SplitText:
        src, refs = load_split(data, split)
        hyps = read_lines(hyp)
        if len(hyps) != len(refs):
            raise NmtError(f"{hyp}: {n_lines(len(hyps))}, {len(refs):,} expected")
        gold = read_gold(data, split, len(src))
        return cls(src, refs, hyps, gold, joined_captions(data, split))


def run_figures(
    loaded: Loaded | None,
    text: SplitText,
    keep: tuple[int, ...],
    known: dict[str, float] | None,
    kept: tuple[FigureCache, str, str] | None,
) -> tuple[dict[str, float], dict[int, AttentionMap], dict[str, np.ndarray], np.ndarray | None]:
    """A split's attention figures and drawn maps (``known``: the figures already read
    for the run, no maps), and its per-sentence and per-caption figures; without the
    model (``loaded`` None, and so no ``kept``), the figures the translations alone
    give. ``kept``: the run's cache, the split and the decoding's name
    (``SPLIT@TAG``), where the figures that read the model are kept
    (nmt.compare.cache)."""
    if loaded is None or kept is None:
        return {}, {}, text_figures(text), text_captions(text.hyps, text.parts)
    cache, split, name = kept
    if known is not None:
        attention, maps = known, {}
    else:
        attention, maps = cache.computed(
            f"{split}.refs",
            cache.key(text.src, text.refs, text.gold, keep),
            lambda: attention_figures(loaded, text.src, text.refs, text.gold, keep),
            REFERENCES,
        )
    parts = None if text.parts is None else (text.parts.src, text.parts.refs, text.parts.k)
    sentences, captions = cache.computed(
        f"{name}.hyps",
        cache.key(text.src, text.hyps, parts),
        lambda: output_figures(loaded, text.src, text.hyps, text.parts),
        OUTPUTS,
    )
    return attention, maps, text_figures(text) | sentences, captions


def recipe_of(run_dir: Path) -> RunConfig:
    """The recipe a run was trained with (``RUN/recipe.yaml``); damage is an error
    naming it."""
    path = run_dir / "recipe.yaml"
    try:
        return config_from_dict(read_yaml(path), str(path))
    except ConfigError as e:
        raise NmtError(f"{path}: damaged ({e})") from None
