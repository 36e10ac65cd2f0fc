"""``nmt data align``: word alignments for a corpus without gold ones, for guided
alignment (``train.alignment``) and for AER in ``compare``.

eflomal (Östling & Tiedemann 2016; the ``align`` extra) is a Bayesian IBM-model
aligner sampled with Gibbs sampling, fast and more accurate than fast_align. It
aligns every split of a directory together (more text, better estimates) in both
directions, symmetrised with grow-diag-final-and. Words are whitespace tokens,
as in the rest of the toolkit; each ``{split}.align`` is written atomically
beside the data, and an existing one is never overwritten.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from nmt import install_hint
from nmt.data.alignment import format_pharaoh, grow_diag_final_and, read_alignments
from nmt.data.corpus import read_parallel, split_path
from nmt.errors import NmtError
from nmt.io.files import write_text


def corpus_splits(directory: Path, src: str, tgt: str) -> list[str]:
    """The splits that have both sides in ``directory`` (plain or .gz)."""
    names = set()
    for path in directory.glob(f"*.{src}*"):
        name = path.name.removesuffix(".gz").removesuffix(f".{src}")
        if path.name in (f"{name}.{src}", f"{name}.{src}.gz"):
            try:
                split_path(directory, name, tgt)
                names.add(name)
            except NmtError:
                pass
    return sorted(names)


def align_corpus(
    directory: Path,
    src: str,
    tgt: str,
    splits: list[str] | None,
    log: Callable[[str], None],
) -> dict[str, int]:
    """Write ``{split}.align`` for ``splits`` (default: every split with both sides);
    returns the number of lines of each."""
    try:
        import eflomal
    except ImportError:
        raise NmtError(f"nmt data align needs the align extra: {install_hint('align')}") from None
    if not directory.is_dir():
        what = "a file, not a directory" if directory.exists() else "no such directory"
        raise NmtError(f"{directory}: {what}")
    if src == tgt:
        raise NmtError(f"--src and --tgt are both {src!r}: name the two sides")
    splits = splits or corpus_splits(directory, src, tgt)
    if not splits:
        raise NmtError(f"{directory}: no split with both .{src} and .{tgt} files")
    for split in splits:
        if (directory / f"{split}.align").exists():
            raise NmtError(f"{directory / (split + '.align')}: exists; not overwritten")
    texts = {
        split: read_parallel(*(split_path(directory, split, x) for x in (src, tgt)))
        for split in splits
    }
    sources = [line for s, _ in texts.values() for line in s]
    targets = [line for _, t in texts.values() for line in t]
    if not sources:
        raise NmtError(f"{directory}: {', '.join(splits)}: empty files, nothing to align")
    log(f"aligning {len(sources):,} sentence pairs of {', '.join(splits)} with eflomal")
    with tempfile.TemporaryDirectory() as tmp:
        fwd, rev = Path(tmp) / "fwd", Path(tmp) / "rev"
        # eflomal reads lines; an empty one is an empty sentence, as here.
        eflomal.Aligner().align(
            [line + "\n" for line in sources],
            [line + "\n" for line in targets],
            links_filename_fwd=str(fwd),
            links_filename_rev=str(rev),
            quiet=True,
        )
        links = [
            grow_diag_final_and(f, r) for f, r in zip(read_alignments(fwd), read_alignments(rev))
        ]
    if len(links) != len(sources):
        raise NmtError(f"eflomal returned {len(links)} alignments for {len(sources)} pairs")
    counts, start = {}, 0
    for split, (s, _) in texts.items():
        part = links[start : start + len(s)]
        write_text(directory / f"{split}.align", "".join(format_pharaoh(a) + "\n" for a in part))
        counts[split], start = len(part), start + len(s)
    return counts
