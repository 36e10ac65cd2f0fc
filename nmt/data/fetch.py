"""``nmt data fetch``: download corpora, verify SHA-256, then write atomically."""

from __future__ import annotations

import gzip
import hashlib
import re
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable
from pathlib import Path

from nmt.errors import NmtError
from nmt.io.files import atomic_write

# The official Multi30k task-1 raw files (Elliott et al. 2016).
MULTI30K_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"

# SHA-256 of each file's *decompressed* text, so a re-compressed copy still verifies.
# Only files whose checksums could be recorded are offered: the 2017/2018 test sets
# and the fr/cs sides are left out until someone records theirs.
MULTI30K_SHA256 = {
    "train.de.gz": "2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72",
    "train.en.gz": "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6",
    "val.de.gz": "660e09eb7e1da2f856ea13ee5ad3cf6d36b3d5b0b733c857e94c5747a3dfc660",
    "val.en.gz": "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227",
    "test_2016_flickr.de.gz": "4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16",
    "test_2016_flickr.en.gz": "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182",
}
CORPORA = {"multi30k": (MULTI30K_URL, MULTI30K_SHA256)}


def _download(source: str, name: str) -> bytes:
    """Bytes of ``name`` from a URL prefix or a local directory."""
    if "://" not in source:
        path = Path(source) / name
        if not path.is_file():
            raise NmtError(f"{path}: no such file in the mirror")
        return path.read_bytes()
    url = source.rstrip("/") + "/" + name
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return response.read()
    except (urllib.error.URLError, OSError) as e:
        raise NmtError(f"{url}: download failed ({getattr(e, 'reason', e)})") from None


def verify(name: str, data: bytes, expected: str) -> None:
    try:
        text = gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as e:
        raise NmtError(f"{name}: broken or truncated download ({e}); nothing written") from None
    actual = hashlib.sha256(text).hexdigest()
    if actual != expected:
        raise NmtError(
            f"{name}: SHA-256 mismatch (expected {expected[:16]}…, got "
            f"{actual[:16]}…); nothing written"
        )


def fetch(
    corpus: str,
    out_dir: Path,
    pairs: list[str],
    mirror: str | None = None,
    log: Callable[[str], None] = print,
) -> list[Path]:
    """Download every split of ``corpus`` for the languages in ``pairs`` (e.g. ``de-en``),
    verify all of them, and only then write them to ``out_dir``. A file already there
    is kept if it verifies, else it is an error (it may be the user's own); nothing
    is downloaded for the kept ones. Returns every file, kept or written."""
    if corpus not in CORPORA:
        raise NmtError(f"unknown corpus {corpus!r}; available: {', '.join(CORPORA)}")
    url, checksums = CORPORA[corpus]
    for pair in pairs:
        if not re.fullmatch(r"[a-z]+-[a-z]+", pair) or len(set(pair.split("-"))) != 2:
            raise NmtError(f"--pairs: {pair!r} is not a language pair such as de-en")
    langs = sorted({lang for pair in pairs for lang in pair.split("-")})
    available = sorted({name.split(".")[-2] for name in checksums})
    missing = [lang for lang in langs if lang not in available]
    if missing or not langs:
        raise NmtError(
            f"--pairs: no verified {corpus} files for {', '.join(missing) or '(none)'};"
            f" available languages: {', '.join(available)}"
        )
    names = [n for n in checksums if n.split(".")[-2] in langs]
    blobs = {}
    for name in names:
        if (out_dir / name).exists():  # verified: kept; anything else: never replaced
            try:
                verify(name, (out_dir / name).read_bytes(), checksums[name])
            except (NmtError, OSError):
                raise NmtError(
                    f"{out_dir / name}: exists and is not the verified file; not "
                    "overwritten (remove it, or choose another directory)"
                ) from None
            log(f"{name}: already there, verified")
            continue
        blobs[name] = _download(mirror or url, name)
        verify(name, blobs[name], checksums[name])
        log(f"verified {name} ({len(blobs[name]):,} bytes)")
    written = [out_dir / name for name in names if name not in blobs]
    for name, data in blobs.items():
        atomic_write(out_dir / name, lambda f, data=data: f.write(data))
        written.append(out_dir / name)
    return written
