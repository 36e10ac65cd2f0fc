"""Prepare a training corpus once; every later run memory-maps it.

What ``fairseq-preprocess`` and nanoGPT's ``prepare.py`` do, done on first use:
the vocabulary is trained on a sample of the training text, and the training
split is encoded, filtered (empty pairs, pairs over ``data.max_len`` pieces) and
written as each side's token ids in one flat array (uint16 when the vocabulary
fits, else uint32) plus int64 offsets. Two entries live under the cache
directory, each keyed by a hash of what made it:

- ``vocab-KEY/``: the SentencePiece model(s), from the vocabulary settings and
  the training files (path, size, modification time);
- ``data-KEY/``: the encoded split, from the training files, the vocabulary's
  bytes and ``max_len``, and each kept pair's line number (``lines``, for what
  is read beside the text: gold alignments).

A changed file or setting makes a new entry, never a stale one; every variant
and seed of a study, every DDP rank and every ``--resume`` with the same data
and vocabulary maps the same pages. An entry is built in a temporary directory
and renamed into place, under a file lock, so two processes never build it
twice nor read it half-written. Each file's CRC-32 is kept in ``meta.json`` and
checked whenever the entry is mapped: a damaged entry (even one of unchanged
size) is rebuilt with a warning.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import shutil
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from nmt.data.batching import ParallelData, Tokens, keep_pairs
from nmt.data.corpus import count_lines, documents_path, iter_lines, iter_parallel
from nmt.data.splits import word_count
from nmt.data.vocab import Vocab, clip_lines
from nmt.errors import NmtError
from nmt.io.files import held
from nmt.progress import LogLines, progress_bar
from nmt.setup.data import DataConfig

FORMAT = 3  # bump when the layout of an entry changes (2: lines; 3: CRC-32 of each file)
CHUNK = 20_000  # pairs encoded per SentencePiece batch call


def cache_root(cfg: DataConfig) -> Path:
    """``data.cache_dir``, else ``$NMT_CACHE_DIR``, else ``~/.cache/nmt``."""
    root = cfg.cache_dir or os.environ.get("NMT_CACHE_DIR") or "~/.cache/nmt"
    return Path(root).expanduser()


def file_stamp(path: Path) -> list[Any]:
    """What identifies a data file's contents without reading it: its resolved path,
    size and modification time (any edit changes the last two)."""
    st = path.stat()
    return [str(path.resolve()), st.st_size, st.st_mtime_ns]


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode("utf-8")).hexdigest()[:20]


@contextlib.contextmanager
def building(entry: Path, log: Callable[[str], None]) -> Iterator[Path | None]:
    """Hold the entry's lock; yield a fresh directory to build it in, or None when
    it is already there. What is built is renamed into place when the block ends
    without an error, else removed."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        why = e.strerror or e
        raise NmtError(f"data.cache_dir: {entry.parent}: cannot write ({why})") from None
    with held(entry.with_name(entry.name + ".lock")):  # another process building it: wait
        if entry.is_dir() and (entry / "meta.json").is_file():
            yield None
            return
        # Holding the lock, nobody else builds this entry: what is there is a damaged
        # entry (or a file in its place) and temp directories of killed builders.
        if entry.exists() or entry.is_symlink():
            log(f"warning: damaged data cache entry {entry} (no meta.json); preparing it again")
        for stale in [entry, *entry.parent.glob(f".{entry.name}.*.tmp")]:
            remove(stale)
        tmp = entry.with_name(f".{entry.name}.{os.getpid()}.tmp")
        try:
            tmp.mkdir()
            yield tmp
            os.rename(tmp, entry)
        except OSError as e:  # a full disk, most often
            why = e.strerror or e
            raise NmtError(f"data.cache_dir: {entry.parent}: cannot write ({why})") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def remove(path: Path) -> None:
    """Remove a file, a link or a directory tree, if there is one."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def trained_lines(files: tuple[Path, Path], side: int, max_words: int | None) -> Iterator[str]:
    """One side's lines of the pairs the model trains on: under ``max_words``
    (``data.train_max_words``) the pairs of more source words are held out of the
    vocabulary as they are of training, so that no piece is learned from them."""
    if max_words is None:
        return iter_lines(files[side])
    if not any(word_count(src) <= max_words for src, _ in iter_parallel(*files)):
        raise NmtError(
            f"data.train_max_words {max_words}: holds out every training pair of {files[0]} "
            "(each has more source words); raise it"
        )
    return (pair[side] for pair in iter_parallel(*files) if word_count(pair[0]) <= max_words)


def vocab_entry(cfg: DataConfig, files: tuple[Path, Path], log: Callable[[str], None]) -> Path:
    """The directory holding the vocabulary that the recipe's settings train on
    ``files`` (the pairs ``data.train_max_words`` keeps), trained now if no run has
    trained it before."""
    v = cfg.vocab
    settings = {k: getattr(v, k) for k in ("size", "joint", "type", "sample")}
    held = [] if cfg.train_max_words is None else [cfg.train_max_words]  # old keys unchanged
    key = digest([FORMAT, settings, *map(file_stamp, files), *held])
    entry = cache_root(cfg) / f"vocab-{key}"
    with building(entry, log) as tmp:
        if tmp is not None:
            check_corpus(files)
            src, tgt = (trained_lines(files, side, cfg.train_max_words) for side in (0, 1))
            sides = {"": itertools.chain(src, tgt)} if v.joint else {".src": src, ".tgt": tgt}
            crc = {}
            for suffix, lines in sides.items():
                what = "a joint" if v.joint else f"the {suffix[1:]}"
                log(f"training {what} SentencePiece {v.type} model ({v.size} pieces)")
                model = Vocab.train(lines, v.size, v.type, v.sample).model
                (tmp / f"spm{suffix}.model").write_bytes(model)
                crc[f"spm{suffix}.model"] = zlib.crc32(model)
            (tmp / "meta.json").write_text(json.dumps({"settings": settings, "crc32": crc}))
    return entry


def vocab_models(
    cfg: DataConfig, files: tuple[Path, Path], log: Callable[[str], None]
) -> dict[Path, bytes]:
    """The SentencePiece model files of :func:`vocab_entry` and their bytes, each
    checked against its CRC-32: a damaged model (flipped bytes can still parse, as
    other pieces) is trained again, with a warning."""
    entry = vocab_entry(cfg, files, log)
    try:
        return read_models(entry)
    except (DamagedEntry, KeyError, TypeError, AttributeError) as e:
        log(f"warning: damaged data cache entry ({e}); preparing it again")
        remove(entry)
        return read_models(vocab_entry(cfg, files, log))


def read_models(entry: Path) -> dict[Path, bytes]:
    models = {}
    for name, crc in read_meta(entry)["crc32"].items():
        path = entry / name
        try:
            models[path] = path.read_bytes()
        except OSError as e:
            raise DamagedEntry(f"{path}: {e.strerror or e}") from None
        if zlib.crc32(models[path]) != crc:
            raise DamagedEntry(f"{path} does not match its checksum")
    return models


def id_dtype(size: int) -> np.dtype:
    """The narrowest unsigned type holding the ids of a vocabulary of ``size``."""
    return np.dtype(np.uint16 if size <= 2**16 else np.uint32)


def check_corpus(files: tuple[Path, Path]) -> None:
    """Fail before training a vocabulary on files that cannot make a training set:
    unequal line counts, bad UTF-8 (each named by :func:`iter_parallel`), no pair
    with text on both sides."""
    text = False
    for s, t in iter_parallel(*files):  # to the end: the line counts are checked there
        text = text or bool(s.strip() and t.strip())
    if not text:
        raise NmtError(f"{files[0]}: empty training set (no pair with text on both sides)")


def encode_split(
    files: tuple[Path, Path],
    src: Vocab,
    tgt: Vocab,
    max_len: int,
    out: Path,
    max_words: int | None = None,
    docs: Path | None = None,
) -> dict[str, int]:
    """Encode, filter and write one split to ``out`` in chunks (bounded memory, a
    progress bar); returns the counts for ``meta.json``. ``max_words``: pairs with
    more source words are held out (``data.train_max_words``). ``docs``: the split's
    document ids, one a line, kept as each pair's document number (``docs``: the
    runs of consecutive lines with one id, numbered from 0)."""
    dtypes = [id_dtype(len(v)) for v in (src, tgt)]
    counts = {"lines": 0, "empty": 0, "long": 0, "held_out": 0, "pairs": 0}
    counts.update(src_ids=0, tgt_ids=0)
    sides = [("src", src, dtypes[0]), ("tgt", tgt, dtypes[1])]
    names = [f"{side}.{part}" for side, *_ in sides for part in ("ids", "offsets")] + ["lines"]
    names += ["docs"] if docs is not None else []
    numbers = document_numbers(docs) if docs is not None else None
    output = ChunkFiles(out, names)
    threads = os.cpu_count() or 1
    try:
        for side, *_ in sides:
            output.write(f"{side}.offsets", np.zeros(1, np.int64))
        with progress_bar() as bar:  # a log has the lines
            total, what = count_lines(files[0]), f"encoding {files[0].name}"
            task = bar.add_task(what, total=total, rate=0.0, unit="pairs/s", info="")
            lines = LogLines(what, "pair", total)
            pairs = iter_parallel(*files)
            while chunk := list(itertools.islice(pairs, CHUNK)):
                encoded = [
                    vocab.sp.encode(clip_lines([p[i] for p in chunk], max_len), num_threads=threads)
                    for i, (_, vocab, _) in enumerate(sides)
                ]
                short = kept_pairs(chunk, encoded, max_len, max_words, counts)
                output.write("lines", counts["lines"] + np.asarray(short, dtype=np.int64))
                if numbers is not None:
                    of_chunk = np.fromiter(itertools.islice(numbers, len(chunk)), np.int64)
                    if len(of_chunk) < len(chunk):
                        raise NmtError(f"{docs}: fewer lines than {files[0]}")
                    output.write("docs", of_chunk[np.asarray(short, dtype=np.int64)])
                counts["lines"] += len(chunk)
                counts["pairs"] += len(short)
                for (side, _, dtype), seqs in zip(sides, encoded):
                    counts[f"{side}_ids"] += output.sequences(
                        side, [seqs[i] for i in short], dtype, counts[f"{side}_ids"]
                    )
                rate = counts["lines"] / max(time.perf_counter() - lines.start, 1e-9)
                bar.update(task, completed=counts["lines"], rate=rate)
                lines.update(counts["lines"])
            lines.end(counts["lines"])
        if numbers is not None and next(numbers, None) is not None:
            raise NmtError(f"{docs}: more lines than {files[0]}")
        output.sync()
    finally:
        output.close()
    dtype_names = {"src_dtype": np.dtype(dtypes[0]).name, "tgt_dtype": np.dtype(dtypes[1]).name}
    return {**counts, **dtype_names, "crc32": output.crc, "docs": docs is not None}


def kept_pairs(
    chunk: list[tuple[str, str]],
    encoded: list[list[list[int]]],
    max_len: int,
    max_words: int | None,
    counts: dict[str, int],
) -> list[int]:
    """The indices of the chunk's pairs that are kept (neither side empty or over
    ``max_len`` pieces, the source within ``max_words``); what is left out is counted."""
    short, empty, long = keep_pairs(*encoded, max_len)
    counts["empty"] += empty
    counts["long"] += long
    if max_words is not None:
        fits = [i for i in short if word_count(chunk[i][0]) <= max_words]
        counts["held_out"] += len(short) - len(fits)
        short = fits
    return short


class ChunkFiles:
    """A split's cache files, written a chunk at a time, each with its running CRC-32
    (kept in ``meta.json``, checked when the cache is read)."""

    def __init__(self, out: Path, names: list[str]) -> None:
        self.files = {name: open(out / name, "wb") for name in names}
        self.crc = dict.fromkeys(names, 0)

    def write(self, name: str, array: np.ndarray) -> None:
        data = array.tobytes()
        self.files[name].write(data)
        self.crc[name] = zlib.crc32(data, self.crc[name])

    def sequences(self, side: str, kept: list[list[int]], dtype: Any, before: int) -> int:
        """One side's kept id sequences: their ends after the ``before`` ids already
        written, then the ids; returns how many ids were written."""
        lengths = np.fromiter(map(len, kept), np.int64, len(kept))
        self.write(f"{side}.offsets", before + np.cumsum(lengths))
        n_ids = int(lengths.sum())
        self.write(f"{side}.ids", np.fromiter(itertools.chain.from_iterable(kept), dtype, n_ids))
        return n_ids

    def sync(self) -> None:
        for f in self.files.values():
            f.flush()
            os.fsync(f.fileno())

    def close(self) -> None:
        for f in self.files.values():
            f.close()


def document_numbers(path: Path) -> Iterator[int]:
    """Each line's document number: the runs of consecutive lines with one id,
    counted from 0; an empty id is an error naming its line."""
    number, last = -1, None
    for i, doc in enumerate(iter_lines(path), 1):
        if not doc.strip():
            raise NmtError(f"{path}:{i}: an empty document id")
        if doc != last:
            number, last = number + 1, doc
        yield number


def data_entry(
    cfg: DataConfig, files: tuple[Path, Path], src: Vocab, tgt: Vocab, log: Callable[[str], None]
) -> Path:
    """The directory holding the training split encoded with these vocabularies,
    encoded now if no run has encoded it before."""
    vocab = [hashlib.sha256(v.model).hexdigest() for v in (src, tgt)]
    held = [] if cfg.train_max_words is None else [cfg.train_max_words]  # old keys unchanged
    docs = documents_path(cfg.dir, cfg.train)
    held += [] if docs is None else [file_stamp(docs)]
    key = digest([FORMAT, vocab, cfg.max_len, *map(file_stamp, files), *held])
    entry = cache_root(cfg) / f"data-{key}"
    with building(entry, log) as tmp:
        if tmp is not None:
            log(f"preparing {files[0]} and {files[1]} in {entry}")
            meta = {"files": [str(f) for f in files], "max_len": cfg.max_len}
            meta["train_max_words"] = cfg.train_max_words
            meta.update(encode_split(files, src, tgt, cfg.max_len, tmp, cfg.train_max_words, docs))
            (tmp / "meta.json").write_text(json.dumps(meta))
    return entry


def read_meta(entry: Path) -> dict[str, Any]:
    try:
        return json.loads((entry / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DamagedEntry(f"{entry}/meta.json: {e}") from None


class DamagedEntry(Exception):
    """A cache entry whose files do not match its meta.json."""


def mapped(entry: Path) -> tuple[ParallelData, dict[str, Any]]:
    """The encoded pairs of an entry, memory-mapped, and its meta.json (with the
    entry's path and size on disk added)."""
    meta = read_meta(entry)
    sides = []
    for side in ("src", "tgt"):
        count, dtype = meta[f"{side}_ids"], np.dtype(meta[f"{side}_dtype"])
        files = (entry / f"{side}.ids", entry / f"{side}.offsets")
        sizes = [count * dtype.itemsize, (meta["pairs"] + 1) * 8]
        if [f.stat().st_size if f.is_file() else -1 for f in files] != sizes:
            raise DamagedEntry(f"{entry}: {side} files do not match meta.json")
        ids = np.memmap(files[0], dtype, "r", shape=(count,)) if count else np.zeros(0, dtype)
        offsets = np.memmap(files[1], np.int64, "r", shape=(meta["pairs"] + 1,))
        if offsets[-1] != count:
            raise DamagedEntry(f"{entry}: {side}.offsets do not end at {count}")
        sides.append(Tokens(ids, offsets))
    lines_file = entry / "lines"
    if not lines_file.is_file() or lines_file.stat().st_size != meta["pairs"] * 8:
        raise DamagedEntry(f"{entry}: lines does not match meta.json")
    data = ParallelData(*sides)
    data.lines = np.memmap(lines_file, np.int64, "r", shape=(meta["pairs"],))
    arrays = {"lines": data.lines}
    if meta.get("docs"):
        docs_file = entry / "docs"
        if not docs_file.is_file() or docs_file.stat().st_size != meta["pairs"] * 8:
            raise DamagedEntry(f"{entry}: docs does not match meta.json")
        data.docs = arrays["docs"] = np.memmap(docs_file, np.int64, "r", shape=(meta["pairs"],))
    for side, tokens in zip(("src", "tgt"), sides):
        arrays.update({f"{side}.ids": tokens.ids, f"{side}.offsets": tokens.offsets})
    for name, array in arrays.items():
        if zlib.crc32(np.ascontiguousarray(array).data) != meta["crc32"][name]:
            raise DamagedEntry(f"{entry}/{name} does not match its checksum")
    size = sum(f.stat().st_size for f in entry.iterdir())
    return data, {**meta, "entry": str(entry), "bytes": size}


def prepared(
    cfg: DataConfig, files: tuple[Path, Path], src: Vocab, tgt: Vocab, log: Callable[[str], None]
) -> tuple[ParallelData, dict[str, Any]]:
    """The training pairs from the cache (prepared first if need be); a damaged entry
    is removed and prepared again."""
    entry = data_entry(cfg, files, src, tgt, log)
    try:
        return mapped(entry)
    except (DamagedEntry, KeyError, TypeError, ValueError) as e:
        log(f"warning: damaged data cache entry ({e}); preparing it again")
        remove(entry)
        return mapped(data_entry(cfg, files, src, tgt, log))
