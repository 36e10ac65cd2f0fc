"""Splits made from splits: NAME*K joins K consecutive pairs, NAME>N keeps the pairs
of more than N source words, and data.train_max_words holds those out of training."""

from __future__ import annotations

import pytest

from nmt.data.pipeline import load_split, recipe_vocabs, split_files
from nmt.data.splits import base_split, derive
from nmt.errors import NmtError
from nmt.setup.config import from_dict
from nmt.setup.data import DataConfig
from nmt.training.run import prepare

SRC = ["a b", "c", "d e f", "g", "h i j k", "l m"]
TGT = ["A B", "C", "D E F", "G", "H I J K", "L M"]


def test_joining_k_pairs_keeps_both_sides_in_order_and_drops_the_remainder():
    src, tgt = derive("test*4", SRC, TGT)
    assert src == ["a b c d e f g"] and tgt == ["A B C D E F G"]
    src, tgt = derive("test*2", SRC, TGT)
    assert src == ["a b c", "d e f g", "h i j k l m"] and tgt == ["A B C", "D E F G", "H I J K L M"]
    assert derive("test*1", SRC, TGT) == (SRC, TGT)
    assert derive("test*7", SRC, TGT) == ([], [])


def test_the_longer_split_keeps_the_pairs_over_n_source_words():
    assert derive("train>2", SRC, TGT) == (["d e f", "h i j k"], ["D E F", "H I J K"])
    assert derive("train>0", SRC, TGT) == (SRC, TGT)


def test_a_derived_name_reads_its_base_splits_files():
    assert [base_split(s) for s in ("test*3", "train>20", "test", "a*b")] == [
        "test",
        "train",
        "test",
        "a*b",
    ]


def test_load_split_derives_from_the_files_and_refuses_an_empty_result(tmp_path):
    for lang, lines in (("de", SRC), ("en", TGT)):
        (tmp_path / f"test.{lang}").write_text("".join(f"{x}\n" for x in lines))
    cfg = DataConfig(dir=str(tmp_path), src_lang="de", tgt_lang="en")
    assert load_split(cfg, "test*3") == (
        ["a b c d e f", "g h i j k l m"],
        ["A B C D E F", "G H I J K L M"],
    )
    with pytest.raises(NmtError, match=r"split 'test\*9': no pair \(of the 6 in .*test.de\)"):
        load_split(cfg, "test*9")
    with pytest.raises(NmtError, match="must be at least 1"):
        load_split(cfg, "test*0")
    with pytest.raises(NmtError, match=r"nope\.de: no such file"):
        load_split(cfg, "nope*2")
    # two suffixes: the files of a base that still has one
    with pytest.raises(
        NmtError,
        match=r"^split 'test\*2\*3': a name carries one suffix .*"
        r"so its files are test\*2's: .*test\*2\.de: no such file",
    ):
        load_split(cfg, "test*2*3")


def test_train_max_words_holds_the_long_pairs_out_of_training_and_dev(tiny_config, toy_dir):
    """Every training and dev pair kept has at most N source words; the held-out ones
    are exactly the split TRAIN>N."""
    n = 6
    trainer = prepare(tiny_config(data={"train_max_words": n}), "cpu")
    data = trainer.data
    src = (toy_dir / "train.src").read_text().splitlines()
    kept = [src[i] for i in data.train.lines]
    long = load_split(trainer.cfg.data, f"train>{n}")[0]
    assert kept and long and all(len(s.split()) <= n for s in kept)
    assert len(kept) + len(long) == len([s for s in src if s.strip()])
    assert data.dev_src and all(len(s.split()) <= n for s in data.dev_src)
    everything = prepare(tiny_config(), "cpu").data
    assert len(everything.train) == len(src) and len(everything.dev_src) > len(data.dev_src)


def test_the_vocabulary_is_learned_on_the_pairs_the_model_trains_on(tmp_path, toy_dir):
    """Under data.train_max_words the held-out long pairs teach SentencePiece nothing:
    a character that only they hold is no piece of the vocabulary (it would be with
    every pair), and the cache keeps the two vocabularies apart."""
    for side in ("src", "tgt"):
        lines = (toy_dir / f"train.{side}").read_text(encoding="utf-8").splitlines()
        long = ["ž " * 30 + "ž"] * 50  # 31 source words: held out under train_max_words 20
        (tmp_path / f"train.{side}").write_text("\n".join(lines + long) + "\n", encoding="utf-8")
    pieces = {}
    for held in (None, 20):
        section = {"dir": str(tmp_path), "src_lang": "src", "tgt_lang": "tgt", "dev": "train"}
        cfg = from_dict(DataConfig, {**section, "vocab": {"size": 200}, "train_max_words": held})
        vocabs = recipe_vocabs(cfg, split_files(cfg, cfg.train), lambda line: None)
        pieces[held] = {vocabs.src.sp.id_to_piece(i) for i in range(len(vocabs.src))}
    assert any("ž" in p for p in pieces[None])
    assert not any("ž" in p for p in pieces[20])
