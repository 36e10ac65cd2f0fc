"""The data cache: prepared once, memory-mapped after, the same batches as the
in-memory pairs, a new entry for any change, damaged entries rebuilt."""

from __future__ import annotations

import dataclasses
import errno
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from nmt.data import cache
from nmt.data.batching import ParallelData
from nmt.data.corpus import read_parallel
from nmt.data.pipeline import encode_pairs, load_training, split_files
from nmt.data.toy import write_corpus
from nmt.errors import NmtError
from nmt.setup.config import from_dict
from nmt.setup.data import DataConfig


@pytest.fixture
def corpus(tmp_path) -> Path:
    write_corpus(tmp_path / "corpus", size=300, seed=3)
    return tmp_path / "corpus"


def config(corpus: Path, tmp_path: Path, **vocab) -> DataConfig:
    data = {"dir": str(corpus), "src_lang": "src", "tgt_lang": "tgt", "max_len": 60}
    data["vocab"] = {"size": 120, **vocab}
    return from_dict(DataConfig, {**data, "cache_dir": str(tmp_path / "cache")})


def load(cfg: DataConfig, tmp_path: Path) -> tuple[object, ParallelData, list[str]]:
    said: list[str] = []
    vocabs, data = load_training(cfg, tmp_path / "run", said.append)
    return vocabs, data, said


def test_cached_pairs_and_batches_equal_the_in_memory_ones(corpus, tmp_path):
    cfg = config(corpus, tmp_path)
    vocabs, data, said = load(cfg, tmp_path)
    assert isinstance(data.src.ids, np.memmap) and data.src.ids.dtype == np.uint16
    src, tgt = read_parallel(*split_files(cfg, cfg.train))
    memory = encode_pairs(src, tgt, vocabs, cfg.max_len, "train", said.append)
    assert said[-1] == said[-2]  # the same "dropped N empty and M over-long" line
    assert len(data) == len(memory) and 0 < len(data) < len(src)
    for i in range(len(data)):
        assert data.src[i].tolist() == memory.src[i].tolist()
        assert data.tgt[i].tolist() == memory.tgt[i].tolist()
    for bucketed in (True, False):
        for epoch in (0, 1):
            got = data.epoch_batches(64, 5, epoch, bucketed)
            want = memory.epoch_batches(64, 5, epoch, bucketed)
            assert [b.tolist() for b in got] == [b.tolist() for b in want]
    a, b = data.collate(got[0]), memory.collate(want[0])
    assert a.align is None and b.align is None  # no guided alignment asked for
    assert all((x == y).all() for x, y in zip(vars(a).values(), vars(b).values()) if x is not None)


def test_a_second_run_trains_and_encodes_nothing(corpus, tmp_path):
    cfg = config(corpus, tmp_path)
    first, data, said = load(cfg, tmp_path)
    assert any("training a joint" in s for s in said) and any("preparing" in s for s in said)
    again, same, said = load(cfg, tmp_path)
    assert not any("training" in s or "preparing" in s for s in said)
    assert again.src.model == first.src.model and (same.src.ids == data.src.ids).all()
    assert (tmp_path / "run" / "spm.model").read_bytes() == first.src.model


def test_a_changed_file_or_setting_makes_a_new_entry(corpus, tmp_path):
    cfg = config(corpus, tmp_path)
    load(cfg, tmp_path)
    entries = set(entries_in(tmp_path))
    for path in split_files(cfg, cfg.train):  # one more pair, same sizes elsewhere
        with open(path, "a", encoding="utf-8") as f:
            f.write("a b c\n")
    _, _, said = load(cfg, tmp_path)
    assert any("training" in s for s in said) and any("preparing" in s for s in said)
    _, _, said = load(config(corpus, tmp_path, size=100), tmp_path)
    assert any("training" in s for s in said)
    _, _, said = load(from_dict(DataConfig, {**_plain(cfg), "max_len": 20}), tmp_path)
    assert any("preparing" in s for s in said) and not any("training" in s for s in said)
    assert len(set(entries_in(tmp_path)) - entries) == 5  # 2 vocabularies, 3 data


def entries_in(tmp_path: Path) -> list[Path]:
    return [p for p in (tmp_path / "cache").iterdir() if p.is_dir()]


def _plain(cfg: DataConfig) -> dict:
    return {**dataclasses.asdict(cfg), "test": list(cfg.test)}


def test_each_kept_pair_knows_its_line(corpus, tmp_path):
    """Pairs dropped as empty or over-long leave gaps in ``lines``: what is read
    beside the text (gold alignments) follows the pairs kept."""
    src = (corpus / "train.src").read_text().splitlines()
    src[5], src[9] = "", "x " * 500  # one empty, one over max_len
    (corpus / "train.src").write_text("\n".join(src) + "\n")
    vocabs, data, _ = load(config(corpus, tmp_path), tmp_path)
    tgt = read_parallel(*split_files(config(corpus, tmp_path), "train"))[1]
    assert 5 not in data.lines and 9 not in data.lines and len(data.lines) == len(data)
    for k, line in enumerate(data.lines[:40]):
        assert vocabs.tgt.decode([data.tgt[k].tolist()])[0] == tgt[line]


def flip(path: Path, value: int) -> None:
    """Overwrite the middle of ``path`` with ``value`` as one int64, same size."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2 // 8 * 8
    data[middle : middle + 8] = np.int64(value).tobytes()
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage", ["truncate", "meta", "lines", "ids out of range", "offsets scrambled", "a file"]
)
def test_a_damaged_entry_is_prepared_again(corpus, tmp_path, damage):
    """Damage of unchanged size too: ids beyond the vocabulary gave an IndexError mid-
    training and scrambled offsets a misleading "out of memory"."""
    cfg = config(corpus, tmp_path)
    _, data, _ = load(cfg, tmp_path)
    want = np.array(data.tgt.ids)  # a copy: the mapped file is about to be damaged
    (entry,) = [p for p in entries_in(tmp_path) if p.name.startswith("data-")]
    if damage in ("truncate", "lines"):
        path = entry / ("tgt.ids" if damage == "truncate" else "lines")
        path.write_bytes(path.read_bytes()[:-6])
    elif damage == "ids out of range":
        flip(entry / "tgt.ids", -1)
    elif damage == "offsets scrambled":
        flip(entry / "src.offsets", 10**12)
    elif damage == "a file":
        shutil.rmtree(entry)
        entry.write_text("not a directory")
    else:
        (entry / "meta.json").write_text("{not json")
    _, again, said = load(cfg, tmp_path)
    assert any("damaged data cache entry" in s for s in said)
    assert (again.tgt.ids == want).all() and len(again) == len(data)


def test_processes_that_meet_build_one_entry(corpus, tmp_path):
    """Two loaders at once: one builds while the other waits on the lock, then maps it."""
    cfg = config(corpus, tmp_path)
    results: list = []
    threads = [threading.Thread(target=lambda: results.append(load(cfg, tmp_path))) for _ in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    built = [s for _, _, said in results for s in said if "preparing" in s]
    assert len(built) == 1 and (results[0][1].src.ids == results[1][1].src.ids).all()
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.endswith(".tmp")]


def test_unequal_files_are_an_error_and_leave_no_entry(corpus, tmp_path):
    cfg = config(corpus, tmp_path)
    src, _ = split_files(cfg, cfg.train)
    with open(src, "a", encoding="utf-8") as f:
        f.write("one more\n")
    with pytest.raises(NmtError, match=r"has 301 lines but .* has 300"):
        load(cfg, tmp_path)
    assert not entries_in(tmp_path)


def test_ids_take_two_bytes_while_the_vocabulary_fits(corpus, tmp_path, monkeypatch):
    assert cache.id_dtype(2**16) == np.uint16 and cache.id_dtype(2**16 + 1) == np.uint32
    cfg = config(corpus, tmp_path)
    _, small, _ = load(cfg, tmp_path)
    monkeypatch.setattr(cache, "id_dtype", lambda size: np.dtype(np.uint32))
    monkeypatch.setattr(cache, "FORMAT", cache.FORMAT + 100)  # a separate entry
    _, large, _ = load(cfg, tmp_path)
    assert large.src.ids.dtype == np.uint32 and (large.src.ids == small.src.ids).all()


def test_a_huge_training_line_is_dropped_and_encoded_only_in_part(corpus, tmp_path, monkeypatch):
    """A line of megabytes reaches SentencePiece cut to CHARS_PER_PIECE x (max_len + 1)
    characters, and its pair is still dropped as over-long."""
    import sentencepiece as spm

    from nmt.data.vocab import CHARS_PER_PIECE

    lines = (corpus / "train.src").read_text().splitlines()
    lines[0] = "lo " * 10**6
    (corpus / "train.src").write_text("\n".join(lines) + "\n")
    longest = []
    encode = spm.SentencePieceProcessor.encode

    def watched(self, inputs, *args, **kwargs):
        if isinstance(inputs, list):
            longest.append(max(map(len, inputs), default=0))
        return encode(self, inputs, *args, **kwargs)

    monkeypatch.setattr(spm.SentencePieceProcessor, "encode", watched)
    cfg = config(corpus, tmp_path)
    _, data, _ = load(cfg, tmp_path)
    assert max(longest) == CHARS_PER_PIECE * (cfg.max_len + 1)
    assert 0 not in data.lines.tolist()  # the huge pair (line 0) is not trained on


def test_separate_vocabularies_learn_their_own_side(corpus, tmp_path):
    """vocab.joint: false trains the source model on the source file and the target
    model on the target file (here the target is upper case, the source is not)."""
    tgt = corpus / "train.tgt"
    tgt.write_text(tgt.read_text().upper())
    vocabs, _, _ = load(config(corpus, tmp_path, joint=False), tmp_path)
    assert not vocabs.joint

    def cases(vocab) -> set[bool]:
        pieces = (vocab.id_to_piece(i) for i in range(4, len(vocab)))
        return {p.isupper() for p in pieces if p.strip("▁").isalpha()}

    assert cases(vocabs.src) == {False} and cases(vocabs.tgt) == {True}


def test_temp_directories_of_killed_builders_are_removed(corpus, tmp_path):
    """kill -9 during ``nmt data prepare`` leaves a temp directory; the next build of
    that entry (holding its lock, so nobody else builds it) removes every such one."""
    cfg = config(corpus, tmp_path)
    load(cfg, tmp_path)
    (entry,) = [p for p in entries_in(tmp_path) if p.name.startswith("data-")]
    stale = entry.with_name(f".{entry.name}.99999999.tmp")
    stale.mkdir()
    (stale / "src.ids").write_bytes(b"partial")
    shutil.rmtree(entry)
    load(cfg, tmp_path)
    assert not stale.exists() and (entry / "meta.json").is_file()


def test_a_full_disk_while_preparing_is_one_line_naming_the_cache(corpus, tmp_path, monkeypatch):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(cache, "encode_split", full)
    cfg = config(corpus, tmp_path)
    with pytest.raises(NmtError, match=r"data\.cache_dir: .*cache: cannot write \(No space left"):
        load(cfg, tmp_path)
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.endswith(".tmp")]


def test_a_damaged_vocabulary_model_is_trained_again(corpus, tmp_path):
    """Flipped bytes in a SentencePiece model can still parse, as other pieces."""
    cfg = config(corpus, tmp_path)
    vocabs, _, _ = load(cfg, tmp_path)
    (entry,) = [p for p in entries_in(tmp_path) if p.name.startswith("vocab-")]
    model = bytearray((entry / "spm.model").read_bytes())
    model[len(model) // 2] ^= 0x01
    (entry / "spm.model").write_bytes(bytes(model))
    again, _, said = load(cfg, tmp_path)
    assert any("damaged data cache entry" in s for s in said)
    assert again.src.model == vocabs.src.model and again.joint
