"""Corpora in the formats people have, written as the ``{split}.{lang}`` files that
every other command reads (the cache, alignment, ``nmt compare``), so that none of
them needs to know another format.

Three sources: a TSV file (source, a tab, target: one pair per line, as OPUS and
WMT's ``paste``-made corpora are shipped), JSON lines (an object per line, the two
sides under fields of their own or under ``translation`` as Hugging Face's
translation datasets have them), and a Hugging Face dataset saved with
``save_to_disk`` (the ``hf`` extra). A segment that would not survive the
one-sentence-per-line layout (a line break inside it) or that is empty is refused
with its file and line, never silently shifted into its neighbour's line.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

from nmt import install_hint
from nmt.data.corpus import count_lines, iter_lines, plain_name
from nmt.errors import NmtError, brief
from nmt.io.files import WRITING, atomic_files, finish_renames
from nmt.io.rundir import owned
from nmt.progress import console, sentence_progress

Format = Literal["tsv", "jsonl", "hf"]
FORMATS: tuple[Format, ...] = ("tsv", "jsonl", "hf")
Records = Iterator[tuple[str, Any, Any]]  # (where it was read, source, target)
BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # what str.splitlines splits on


@dataclass(frozen=True)
class Sides:
    """Which language is which, and where each side is read in a JSON object:
    ``src_field``/``tgt_field`` when given, else ``translation[LANG]`` when the
    object has a ``translation`` field, else the field named by the language."""

    src_lang: str
    tgt_lang: str
    src_field: str | None = None
    tgt_field: str | None = None

    def __post_init__(self) -> None:
        for key, lang in (("--src-lang", self.src_lang), ("--tgt-lang", self.tgt_lang)):
            if not plain_name(lang) or not lang.isprintable() or "." in lang:
                raise NmtError(f"{key} {lang!r}: a file suffix such as de, not a path")
        if self.src_lang == self.tgt_lang:
            raise NmtError(f"--tgt-lang {self.tgt_lang!r}: must differ from --src-lang")

    def of(self, record: Any, where: str) -> tuple[Any, Any]:
        """The source and target of one JSON object (or dataset row)."""
        if not isinstance(record, dict):
            raise NmtError(f"{where}: expected a JSON object, found {type(record).__name__}")
        pair = []
        for field, lang in ((self.src_field, self.src_lang), (self.tgt_field, self.tgt_lang)):
            if field is not None:
                holder, key, name = record, field, field
            elif "translation" in record:
                holder, key, name = record["translation"], lang, f"translation.{lang}"
                if not isinstance(holder, dict):
                    raise NmtError(f"{where}: translation is not an object")
            else:
                holder, key, name = record, lang, lang
            if key not in holder:
                fields = ", ".join(sorted(map(str, holder))) or "none"
                raise NmtError(f"{where}: no field {name!r} (fields: {fields})")
            pair.append(holder[key])
        return pair[0], pair[1]


def segment(text: Any, where: str, side: str) -> str:
    """``text`` as one line of a corpus file, or an error naming where it was read."""
    if not isinstance(text, str):
        raise NmtError(f"{where}: the {side} is {type(text).__name__}, expected text")
    if any(c in BREAKS for c in text):
        raise NmtError(
            f"{where}: the {side} holds a line break; one segment must be one line "
            "(split it into sentences, or join its lines, before importing)"
        )
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:  # a lone surrogate (JSON's "\ud800")
        raise NmtError(
            f"{where}: the {side} holds {text[e.start]!a}, half of a UTF-16 pair: not text"
        ) from None
    return text.strip()


def tsv_pairs(path: Path) -> Records:
    """(where, source, target) for every line of a TSV file (plain or .gz)."""
    for number, line in enumerate(iter_lines(path), 1):
        where = f"{path}:{number}"
        if line.count("\t") != 1:
            raise NmtError(
                f"{where}: {line.count(chr(9))} tabs; a TSV line is source, one tab, target"
            )
        src, tgt = line.split("\t")
        yield where, src, tgt


def jsonl_pairs(path: Path, sides: Sides) -> Records:
    """(where, source, target) for every line of a JSON-lines file (plain or .gz)."""
    for number, line in enumerate(iter_lines(path), 1):
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise NmtError(f"{where}: not JSON ({e.msg} at column {e.colno})") from None
        except (ValueError, RecursionError) as e:  # a number of over 4,300 digits; deep nesting
            why = "nested too deeply" if isinstance(e, RecursionError) else str(e).split(";")[0]
            raise NmtError(f"{where}: not readable JSON ({why})") from None
        yield where, *sides.of(record, where)


def hf_splits(path: Path) -> dict[str, Any]:
    """The splits of a dataset saved with ``save_to_disk`` (a ``Dataset`` is one
    split, named ``train``)."""
    try:
        import datasets
    except ImportError:
        raise NmtError(f"--format hf needs the hf extra: {install_hint('hf')}") from None
    if not path.is_dir():
        raise NmtError(f"{path}: not a directory; a Hugging Face dataset is saved as one")
    try:
        loaded = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError, OSError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise NmtError(f"{path}: not a dataset saved with save_to_disk ({reason})") from None
    if isinstance(loaded, datasets.DatasetDict):
        return dict(loaded)
    return {"train": loaded}


def hf_pairs(path: Path, split: str, rows: Iterable[Any], sides: Sides) -> Records:
    """(where, source, target) for every row of one split of a dataset; a row that
    pyarrow cannot read (a damaged .arrow file) is an error naming it."""
    rows = iter(rows)
    for number in itertools.count(1):
        where = f"{path}[{split}] row {number}"
        try:
            record = next(rows)
        except StopIteration:
            return
        except Exception as e:  # pyarrow's readers raise what their C++ and Cython do
            raise NmtError(f"{where}: damaged, cannot be read ({brief(e)})") from None
        yield where, *sides.of(record, where)


def renames(splits: list[str]) -> dict[str, str]:
    """``--split`` values as {read: written}: ``NAME`` or ``FROM=TO``."""
    out = {}
    for entry in splits:
        read, _, written = entry.partition("=")
        read, written = read.strip(), (written or read).strip()
        # the name read is the dataset's own; the name written becomes file names
        if not read or not plain_name(written) or not written.isprintable():
            raise NmtError(f"--split {entry!r}: a split name such as train or validation=val")
        if read in out:
            raise NmtError(f"--split {read!r}: given twice")
        out[read] = written
    if len(set(out.values())) < len(out):
        raise NmtError(f"--split: two splits written under one name ({', '.join(splits)})")
    return out


def sources(
    source: Path, fmt: Format, splits: list[str], sides: Sides
) -> dict[str, tuple[int, Records]]:
    """{split written: (how many records, the records)} for ``source``."""
    names = renames(splits)
    if fmt == "hf":
        found = hf_splits(source)
        unknown = [s for s in names if s not in found]
        if unknown:
            raise NmtError(f"--split {unknown[0]!r}: {source} has {', '.join(found)}")
        chosen = names or {s: s for s in found}
        for read, written in chosen.items():
            if not plain_name(written) or not written.isprintable():
                raise NmtError(
                    f"{source}: its split {read!r} cannot name a file ({written!r}); "
                    "write it under a name of your own with --split 'NAME=train'"
                )
        return {
            written: (len(found[read]), hf_pairs(source, read, found[read], sides))
            for read, written in chosen.items()
        }
    if not source.is_file():
        raise NmtError(f"{source}: no such file")
    if len(names) > 1:
        raise NmtError(f"--split: a {fmt} file is one split; give one name")
    written = next(iter(names.values()), source.name.split(".")[0])
    if not plain_name(written):
        raise NmtError(f"{source}: name the split it holds with --split")
    records = tsv_pairs(source) if fmt == "tsv" else jsonl_pairs(source, sides)
    return {written: (count_lines(source), records)}


def import_corpus(
    source: str | Path,
    out_dir: str | Path,
    fmt: Format,
    sides: Sides,
    splits: list[str] | None = None,
    skip_empty: bool = False,
    force: bool = False,
    show: bool = False,
) -> dict[str, dict[str, int]]:
    """Write ``OUT/{split}.{src_lang}`` and ``.{tgt_lang}`` for every split of
    ``source``; returns {split: {"pairs": written, "empty": skipped}}.

    Segments are stripped of surrounding white space. Every file is written through
    an atomic temp file and all of them are kept only together: a bad record
    anywhere leaves no file of the import. Files already in ``out_dir`` are refused,
    before anything is read, unless ``force``. ``show``: a bar per split on a
    terminal (lines in a log).
    """
    if fmt not in FORMATS:
        raise NmtError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")
    source, out_dir = Path(source), Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise NmtError(f"{out_dir}: exists and is not a directory")
    todo = sources(source, fmt, splits or [], sides)
    langs = (sides.src_lang, sides.tgt_lang)
    counts = {}
    # one import into a directory at a time: the check for files already there and
    # the writes that follow it are one step
    with owned(out_dir, key="OUT", lock=WRITING):
        finish_renames(out_dir)
        if not force:
            refuse_existing(out_dir, [f"{split}.{lang}" for split in todo for lang in langs])
        paths = [out_dir / f"{split}.{lang}" for split in todo for lang in langs]
        with atomic_files(paths) as files:  # every file kept, or none
            for i, (split, (total, records)) in enumerate(todo.items()):
                with sentence_progress(
                    f"import {split}", total, show and console.is_terminal
                ) as advance:
                    pair = files[2 * i : 2 * i + 2]
                    counts[split] = write_split(split, pair, records, skip_empty, advance)
    return counts


def refuse_existing(out_dir: Path, names: list[str]) -> None:
    """An error naming the first of ``names`` (or its .gz) already in ``out_dir``."""
    for name in names:
        for candidate in (name, f"{name}.gz"):
            if (out_dir / candidate).exists():
                raise NmtError(
                    f"{out_dir / candidate}: already there; not overwritten (--force replaces it)"
                )


def write_split(
    split: str,
    files: list[BinaryIO],
    records: Records,
    skip_empty: bool,
    advance: Callable[[int], None],
) -> dict[str, int]:
    """Both sides of one split, streamed into its two files."""
    pairs = empty = 0
    for number, (where, src, tgt) in enumerate(records, 1):
        if number % 10_000 == 0:
            advance(10_000)
        src, tgt = segment(src, where, "source"), segment(tgt, where, "target")
        if not src or not tgt:
            if skip_empty:
                empty += 1
                continue
            side = "source" if not src else "target"
            raise NmtError(f"{where}: the {side} is empty (--skip-empty leaves such pairs out)")
        files[0].write(src.encode() + b"\n")
        files[1].write(tgt.encode() + b"\n")
        pairs += 1
    if not pairs:
        raise NmtError(f"{split}: no pairs to write")
    advance((pairs + empty) % 10_000)
    return {"pairs": pairs, "empty": empty}
