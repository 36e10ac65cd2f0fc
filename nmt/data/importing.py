"""Corpora in the formats people have, written as the ``{split}.{lang}`` files that
every other command reads (the cache, alignment, ``nmt compare``), so that none of
them needs to know another format.

Four sources: a TSV file (source, a tab, target: one pair per line, as OPUS and
WMT's ``paste``-made corpora are shipped; other columns, a document id among them,
named with ``columns``), JSON lines (an object per line, the two sides under fields
of their own or under ``translation`` as Hugging Face's translation datasets have
them), a Hugging Face dataset saved with ``save_to_disk`` (the ``hf`` extra), and
the XML of IWSLT and WMT test sets (``<doc docid=…><seg id=…>``, a file per
language). A segment that would not survive the one-sentence-per-line layout (a line
break inside it) or that is empty is refused with its file and line, never silently
shifted into its neighbour's line.

Where the source says which document each pair belongs to (a TSV's document column,
the XML's ``docid``), the ids are written line by line to ``{split}.doc`` (and a
section column's to ``{split}.section``): ``NAME~K`` splits and ``data.join``'s
``order: document`` read them (nmt.data.splits, nmt.data.joining).
"""

from __future__ import annotations

import html
import itertools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal, NamedTuple

from nmt import install_hint
from nmt.data.corpus import count_lines, iter_lines
from nmt.errors import NmtError, brief
from nmt.io.files import WRITING, atomic_files, finish_renames
from nmt.io.rundir import is_run, owned
from nmt.progress import sentence_progress
from nmt.setup.data import plain_name

Format = Literal["tsv", "jsonl", "hf", "xml"]
FORMATS: tuple[Format, ...] = ("tsv", "jsonl", "hf", "xml")
# (where it was read, source, target, document id, section id: None where unknown)
Record = tuple[str, Any, Any, "str | None", "str | None"]
Records = Iterator[Record]
ROLES = ("src", "tgt", "doc", "section")  # what a TSV column can hold ("" for none)
EXTRAS = ("doc", "section")  # written as {split}.doc, {split}.section


class Source(NamedTuple):
    """One split to write: how many records it has, the records, and which of the
    ids beside the text (EXTRAS) it carries."""

    count: int
    records: Records
    extras: tuple[str, ...] = ()


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


def tsv_columns(text: str) -> tuple[str, ...]:
    """``--columns``: each TSV column's role, comma-separated (src, tgt, doc,
    section, or nothing for a column to leave out): ``src,tgt`` by default."""
    columns = tuple(c.strip() for c in text.split(","))
    unknown = [c for c in columns if c and c not in ROLES]
    if unknown:
        raise NmtError(f"--columns {text!r}: {unknown[0]!r} is none of {', '.join(ROLES)}")
    for role in ROLES:
        if columns.count(role) > 1:
            raise NmtError(f"--columns {text!r}: {role} named twice")
    for role in ("src", "tgt"):
        if role not in columns:
            raise NmtError(f"--columns {text!r}: no {role} column")
    return columns


def tsv_pairs(path: Path, columns: tuple[str, ...], sides: Sides, header: bool) -> Records:
    """The record of every line of a TSV file (plain or .gz) whose columns hold what
    ``columns`` says; ``header``: its first line names the columns and is skipped.

    Without ``header``, a first line whose source and target cells name the two
    sides (``src``/``source``/the source language, and the same for the target) is
    refused: it is a header that would be imported as a pair."""
    tabs = len(columns) - 1
    for number, line in enumerate(iter_lines(path), 1):
        where = f"{path}:{number}"
        if line.count("\t") != tabs:
            raise NmtError(
                f"{where}: {line.count(chr(9))} tabs; a TSV line here is {len(columns)} columns "
                f"({','.join(columns)}), {tabs} tab{'s' * (tabs != 1)}"
            )
        cells = dict(zip(columns, line.split("\t")))
        if number == 1 and header:
            continue
        if number == 1 and names_sides(cells["src"], cells["tgt"], sides):
            raise NmtError(
                f"{where}: a header ({cells['src'].strip()}, {cells['tgt'].strip()}), "
                "not a pair: --header skips it"
            )
        yield where, cells["src"], cells["tgt"], cells.get("doc"), cells.get("section")


def names_sides(src: str, tgt: str, sides: Sides) -> bool:
    """Whether a TSV line's two cells read as column names rather than a pair."""
    src_names = ("src", "source", sides.src_lang.lower())
    tgt_names = ("tgt", "target", sides.tgt_lang.lower())
    return src.strip().lower() in src_names and tgt.strip().lower() in tgt_names


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
        yield where, *sides.of(record, where), None, None


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
        yield where, *sides.of(record, where), None, None


DOC = re.compile(r"<doc\b([^>]*)>(.*?)</doc>", re.S)
DOCID = re.compile(r"""\bdocid\s*=\s*["']([^"']*)["']""")
SEG = re.compile(r"""<seg\b[^>]*?\bid\s*=\s*["']([^"']*)["'][^>]*>(.*?)</seg>""", re.S)


def xml_segments(path: Path) -> dict[tuple[str, str], str]:
    """{(docid, seg id): text} of an IWSLT/WMT XML file (plain or .gz), in order. Read
    with patterns, not an XML parser: no entity of the file is ever expanded beyond
    the five of XML and character references (html.unescape)."""
    text = "\n".join(iter_lines(path))
    out: dict[tuple[str, str], str] = {}
    for head, body in DOC.findall(text):
        found = DOCID.search(head)
        if found is None:
            raise NmtError(f"{path}: a <doc> without docid")
        for seg, content in SEG.findall(body):
            key = (html.unescape(found.group(1)), html.unescape(seg))
            if key in out:
                raise NmtError(f"{path}: doc {key[0]} has seg id {key[1]} twice")
            out[key] = html.unescape(content)
    if not out:
        raise NmtError(f"{path}: no <doc docid=...> holding <seg id=...> segments")
    return out


def xml_twin(path: Path, sides: Sides) -> Path:
    """The target file of an XML source file: the same name with the target language
    where the source's stands (``x.de-en.de.xml`` -> ``x.de-en.en.xml``)."""
    name = path.name
    for ext in (".xml.gz", ".xml"):
        if name.endswith(f".{sides.src_lang}{ext}"):
            twin = path.with_name(name[: -len(sides.src_lang + ext)] + sides.tgt_lang + ext)
            if not twin.is_file():
                raise NmtError(f"{path}: its target file {twin.name} is not beside it")
            return twin
    raise NmtError(f"{path}: an XML source file is named *.{sides.src_lang}.xml (or .xml.gz)")


def xml_pairs(path: Path, sides: Sides) -> tuple[int, Records]:
    """The segments of an XML source file and of its target twin, paired by
    document and segment id (every one of either file must have its twin)."""
    src, tgt = xml_segments(path), xml_segments(twin := xml_twin(path, sides))
    for a, b, pa in ((src, tgt, twin), (tgt, src, path)):
        missing = next((k for k in a if k not in b), None)
        if missing is not None:
            raise NmtError(f"{pa}: doc {missing[0]} has no seg id {missing[1]}")

    def records() -> Records:
        for (doc, seg), text in src.items():
            yield f"{path} doc {doc} seg {seg}", text, tgt[(doc, seg)], doc, None

    return len(src), records()


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


def infer_format(source: Path) -> Format:
    """``--format`` from the source's name: a directory is a saved dataset."""
    if source.is_dir():
        return "hf"
    name = source.name.removesuffix(".gz")
    for fmt, suffixes in (("tsv", (".tsv",)), ("jsonl", (".jsonl", ".json")), ("xml", (".xml",))):
        if name.endswith(suffixes):
            return fmt  # type: ignore[return-value]
    raise NmtError(f"{source}: give --format (one of {', '.join(FORMATS)}); its name says none")


def sources(source: Path, fmt: Format, sides: Sides, options: ImportOptions) -> dict[str, Source]:
    """{split written: what to write} for ``source``."""
    splits, columns, header = list(options.splits), options.columns, options.header
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
            written: Source(len(found[read]), hf_pairs(source, read, found[read], sides))
            for read, written in chosen.items()
        }
    if not source.is_file():
        raise NmtError(f"{source}: no such file")
    if len(names) > 1:
        raise NmtError(f"--split: a {fmt} file is one split; give one name")
    written = next(iter(names.values()), source.name.split(".")[0])
    if not plain_name(written):
        raise NmtError(f"{source}: name the split it holds with --split")
    if fmt == "xml":
        return {written: Source(*xml_pairs(source, sides), ("doc",))}
    if fmt == "tsv":
        extras = tuple(e for e in EXTRAS if e in columns)
        records = tsv_pairs(source, columns, sides, header)
        return {written: Source(max(count_lines(source) - header, 0), records, extras)}
    return {written: Source(count_lines(source), jsonl_pairs(source, sides))}


@dataclass(frozen=True)
class ImportOptions:
    """How ``nmt data import`` reads and writes: ``splits`` (``NAME`` or
    ``SOURCE=NAME``; none: every split the source has), ``skip_empty`` (leave out
    pairs with an empty side, counted, instead of refusing them), ``force`` (replace
    files already there), ``show`` (a bar per split on a terminal, lines in a log),
    ``columns`` (a TSV's columns, :func:`tsv_columns`), ``header`` (a TSV's first
    line names its columns: skipped)."""

    splits: tuple[str, ...] = ()
    skip_empty: bool = False
    force: bool = False
    show: bool = False
    columns: tuple[str, ...] = ("src", "tgt")
    header: bool = False


def import_corpus(
    source: str | Path,
    out_dir: str | Path,
    fmt: Format | None,
    sides: Sides,
    options: ImportOptions = ImportOptions(),
) -> dict[str, dict[str, int]]:
    """Write ``OUT/{split}.{src_lang}`` and ``.{tgt_lang}`` for every split of
    ``source`` (and ``{split}.doc``, ``.section`` where it has them); returns {split:
    {"pairs": written, "empty": skipped}}. ``fmt`` None: from the source's name.

    Segments are stripped of surrounding white space. Every file is written through
    an atomic temp file and all of them are kept only together: a bad record
    anywhere leaves no file of the import. Files already in ``out_dir`` are refused,
    before anything is read, unless ``options.force``.
    """
    source, out_dir, columns = Path(source), Path(out_dir), options.columns
    fmt = infer_format(source) if fmt is None else fmt
    if fmt not in FORMATS:
        raise NmtError(f"--format {fmt!r}: one of {', '.join(FORMATS)}")
    if columns != ("src", "tgt") and fmt != "tsv":
        raise NmtError("--columns: only --format tsv has columns")
    if options.header and fmt != "tsv":
        raise NmtError("--header: only --format tsv has a header line")
    if out_dir.exists() and not out_dir.is_dir():
        raise NmtError(f"{out_dir}: exists and is not a directory")
    if is_run(out_dir):
        raise NmtError(f"{out_dir}: holds a training run; import into a data directory")
    todo = sources(source, fmt, sides, options)
    langs = (sides.src_lang, sides.tgt_lang)
    names = {split: [f"{split}.{x}" for x in (*langs, *s.extras)] for split, s in todo.items()}
    counts = {}
    # one import into a directory at a time: the check for files already there and
    # the writes that follow it are one step
    with owned(out_dir, key="OUT", lock=WRITING):
        finish_renames(out_dir)
        if not options.force:
            refuse_existing(out_dir, [name for split in names.values() for name in split])
        paths = [out_dir / name for split in names.values() for name in split]
        with atomic_files(paths) as files:  # every file kept, or none
            at = 0
            for split, (total, records, extras) in todo.items():
                mine = files[at : at + 2 + len(extras)]
                at += len(mine)
                with sentence_progress(f"import {split}", total, options.show) as progress:
                    counts[split] = write_split(
                        split, mine, records, extras, options.skip_empty, progress.done
                    )
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
    extras: tuple[str, ...],
    skip_empty: bool,
    advance: Callable[[int], None],
) -> dict[str, int]:
    """Both sides of one split, and the ids in ``extras``, streamed into its files."""
    pairs = empty = 0
    for number, (where, src, tgt, doc, section) in enumerate(records, 1):
        if number % 10_000 == 0:
            advance(10_000)
        src, tgt = segment(src, where, "source"), segment(tgt, where, "target")
        ids = [segment(i, where, f"{e} id") for e, i in zip(EXTRAS, (doc, section)) if e in extras]
        if not src or not tgt:
            if skip_empty:
                empty += 1
                continue
            side = "source" if not src else "target"
            raise NmtError(f"{where}: the {side} is empty (--skip-empty leaves such pairs out)")
        for extra, value in zip(extras, ids):
            if not value:
                raise NmtError(f"{where}: the {extra} id is empty (every pair needs one)")
        for f, text in zip(files, (src, tgt, *ids)):
            f.write(text.encode() + b"\n")
        pairs += 1
    if not pairs:
        raise NmtError(f"{split}: no pairs to write")
    advance((pairs + empty) % 10_000)
    return {"pairs": pairs, "empty": empty}
