"""Reading parallel text: plain or gzipped UTF-8, one sentence per line."""

from __future__ import annotations

import gzip
import itertools
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

from nmt.errors import NmtError
from nmt.io.files import settled
from nmt.progress import counted
from nmt.setup.data import plain_name

BLOCK = 1 << 20  # bytes count_lines reads at a time


def split_path(directory: str | Path, split: str, lang: str) -> Path:
    """``{dir}/{split}.{lang}``, or its ``.gz`` sibling; an error names both if neither
    exists, and a split or language that is a path is an error too."""
    for what, name in (("split", split), ("language", lang)):
        if not plain_name(name) or not name.isprintable():
            raise NmtError(
                f"{what} {name!r}: a name of files in data.dir (e.g. test for test.{lang}), "
                "not a path"
            )
    plain = Path(directory) / f"{split}.{lang}"
    settled(plain.parent)  # an import's renames complete: never one file new, one old
    for path in (plain, plain.with_name(plain.name + ".gz")):
        if path.exists():
            if not path.is_file():
                raise NmtError(f"{path}: is a directory, expected a text file")
            return path
    raise NmtError(f"{plain}: no such file (nor {plain.name}.gz)")


def documents_path(directory: str | Path, split: str) -> Path | None:
    """``{dir}/{split}.doc`` (or ``.doc.gz``): the split's document ids, one a line,
    where ``nmt data import`` wrote them; None where there are none."""
    plain = Path(directory) / f"{split}.doc"
    for path in (plain, plain.with_name(plain.name + ".gz")):
        if path.is_file():
            return path
    return None


def read_documents(directory: str | Path, split: str, lines: int) -> list[str] | None:
    """The split's document id of each line, None without a ``.doc`` file; a file of
    another length than the split's, or an empty id, is an error naming it."""
    path = documents_path(directory, split)
    if path is None:
        return None
    docs = read_lines(path)
    if len(docs) != lines:
        raise NmtError(f"{path}: {n_lines(len(docs))}, but {split} has {lines:,}")
    empty = next((i for i, d in enumerate(docs, 1) if not d.strip()), None)
    if empty is not None:
        raise NmtError(f"{path}:{empty}: an empty document id")
    return docs


def read_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 (optionally .gz) file, without line endings (LF or CRLF).

    An undecodable byte is an error naming the file and line.
    """
    return list(iter_lines(path))


def read_input(path: str | Path | None) -> list[str]:
    """The lines of ``path``, or of standard input when it is None or ``-``."""
    if path is None or str(path) == "-":
        return decode_lines(sys.stdin.buffer.read(), "<stdin>")
    return read_lines(path)


def input_chunks(path: str | Path | None, size: int) -> tuple[int, Iterator[list[str]]]:
    """The lines of ``path`` (stdin when None or ``-``) in lists of at most ``size``,
    and how many there are.

    Every line is decoded before the first list comes, so a bad byte anywhere is an
    error before any work. A regular file is then read again, list by list, so
    that its lines are never all held at once; stdin, a pipe or a device cannot be
    read twice and is held whole.
    """
    if path is None or str(path) == "-" or not Path(path).is_file():
        lines = read_input(path)
        return len(lines), (lines[i : i + size] for i in range(0, len(lines), size))

    def chunks() -> Iterator[list[str]]:
        lines = iter_lines(path)
        while chunk := list(itertools.islice(lines, size)):
            yield chunk

    return sum(1 for _ in iter_lines(path)), chunks()


def iter_lines(path: str | Path) -> Iterator[str]:
    """The lines of :func:`read_lines` one at a time, for corpora too large to hold."""
    path = Path(path)
    if path.is_dir():
        raise NmtError(f"{path}: is a directory, expected a text file")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            for number, line in enumerate(f, 1):
                yield decode_line(line.removesuffix(b"\n"), str(path), number)
    except FileNotFoundError:
        raise NmtError(f"{path}: no such file") from None
    except (OSError, EOFError, zlib.error) as e:  # zlib: a corrupt deflate stream
        raise NmtError(f"{path}: cannot read ({e})") from None


def count_lines(path: str | Path) -> int:
    """The number of lines :func:`iter_lines` yields, counted without decoding."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    count, last = 0, b"\n"
    try:
        with opener(path, "rb") as f:
            while block := f.read(BLOCK):
                count, last = count + block.count(b"\n"), block[-1:]
    except (OSError, EOFError, zlib.error) as e:
        raise NmtError(f"{path}: cannot read ({e})") from None
    return count + (last != b"\n")


def decode_lines(raw: bytes, name: str) -> list[str]:
    """Split UTF-8 bytes into lines (LF or CRLF); a bad byte names ``name`` and the line."""
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [decode_line(line, name, number) for number, line in enumerate(lines, 1)]


def decode_line(line: bytes, name: str, number: int) -> str:
    """One line of UTF-8 without its LF, its CR dropped, and on line 1 without a
    byte-order mark (what Windows editors put first: a mark, not text); a bad byte
    names the line."""
    try:
        text = line.decode("utf-8").removesuffix("\r")
        return text.removeprefix("\ufeff") if number == 1 else text
    except UnicodeDecodeError as e:
        raise NmtError(
            f"{name}:{number}: not UTF-8 text (byte 0x{line[e.start]:02x} at column {e.start + 1})"
        ) from None


def uneven(a: Path, n_a: int, b: Path, n_b: int) -> NmtError:
    """The error for two files that should be line-parallel and are not."""
    return NmtError(f"{a} has {n_lines(n_a)} but {b} has {n_b:,}")


def n_lines(n: int) -> str:
    return counted(n, "line")


def iter_parallel(src_path: Path, tgt_path: Path) -> Iterator[tuple[str, str]]:
    """Source and target lines in pairs, streamed; their counts must match."""
    src, tgt = iter_lines(src_path), iter_lines(tgt_path)
    for count, pair in enumerate(itertools.zip_longest(src, tgt)):
        if None in pair:
            longer = src if pair[0] is not None else tgt
            more = count + 1 + sum(1 for _ in longer)
            n_src, n_tgt = (more, count) if pair[0] is not None else (count, more)
            raise uneven(src_path, n_src, tgt_path, n_tgt)
        yield pair


def read_parallel(src_path: Path, tgt_path: Path) -> tuple[list[str], list[str]]:
    """Source and target lines; their counts must match."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise uneven(src_path, len(src), tgt_path, len(tgt))
    return src, tgt
