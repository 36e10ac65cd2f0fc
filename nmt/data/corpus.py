"""Reading parallel text: plain or gzipped UTF-8, one sentence per line."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from nmt.errors import NmtError


def split_path(directory: str | Path, split: str, lang: str) -> Path:
    """``{dir}/{split}.{lang}``, or its ``.gz`` sibling; an error names both if neither exists."""
    plain = Path(directory) / f"{split}.{lang}"
    for path in (plain, plain.with_name(plain.name + ".gz")):
        if path.exists():
            if not path.is_file():
                raise NmtError(f"{path}: is a directory, expected a text file")
            return path
    raise NmtError(f"{plain}: no such file (nor {plain.name}.gz)")


def read_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 (optionally .gz) file, without line endings (LF or CRLF).

    An undecodable byte is an error naming the file and line.
    """
    path = Path(path)
    if path.is_dir():
        raise NmtError(f"{path}: is a directory, expected a text file")
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise NmtError(f"{path}: no such file") from None
    except (OSError, EOFError, zlib.error) as e:  # zlib: a corrupt deflate stream
        raise NmtError(f"{path}: cannot read ({e})") from None
    return decode_lines(raw, str(path))


def decode_lines(raw: bytes, name: str) -> list[str]:
    """Split UTF-8 bytes into lines (LF or CRLF); a bad byte names ``name`` and the line."""
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    for number, line in enumerate(lines, 1):
        try:
            out.append(line.decode("utf-8").removesuffix("\r"))
        except UnicodeDecodeError as e:
            raise NmtError(
                f"{name}:{number}: not UTF-8 text (byte 0x{line[e.start]:02x} "
                f"at column {e.start + 1})"
            ) from None
    return out


def read_parallel(src_path: Path, tgt_path: Path) -> tuple[list[str], list[str]]:
    """Source and target lines; their counts must match."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise NmtError(f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}")
    return src, tgt
