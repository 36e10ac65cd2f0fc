"""scripts/paragraph_figures.py, which gathers the figures docs/results.md's
"Paragraphs" section cites, recomputes each split's scores from the run's files;
scripts/shape_offsets.py decodes with the positions moved, and at 0:0 as nmt
evaluate does."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import sacrebleu
import torch

from nmt.api import evaluate
from nmt.model.load import load_model
from tests.helpers import random_batch, script_module

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "paragraph_figures.py"


@pytest.mark.slow  # it decodes: a second or more
def test_paragraph_figures_rescore_a_runs_outputs_and_their_joins(
    tiny_run, toy_dir, tmp_path, monkeypatch
):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    evaluate(run, ["test", "test*2"], device="cpu")
    split = ["decode.split=sentences", "decode.split_lang=en"]
    evaluate(run, ["test*2"], overrides=split, device="cpu")
    out = tmp_path / "figures.json"
    monkeypatch.setattr(sys, "argv", [str(SCRIPT), str(out), str(run)])
    script_module(SCRIPT, monkeypatch).main()  # as its last line calls it
    figures = json.loads(out.read_text())[str(run)]
    assert set(figures) >= {"test", "test*2", "test*2 from single outputs"}
    hyps = (run / "test.hyp").read_text().splitlines()
    refs = (toy_dir / "test.tgt").read_text().splitlines()
    bleu = sacrebleu.corpus_bleu(hyps, [refs])
    assert figures["test"]["bleu"] == bleu.score
    assert figures["test"]["ratio"] == bleu.sys_len / bleu.ref_len
    # joined as test*2 joins: 15 lines make 7 pairs, the odd one left out
    two = [" ".join(hyps[i : i + 2]) for i in range(0, 14, 2)]
    refs2 = [" ".join(refs[i : i + 2]) for i in range(0, 14, 2)]
    joined = figures["test*2 from single outputs"]
    assert joined["chrf"] == sacrebleu.corpus_chrf(two, [refs2]).score
    # split-then-translate, by what the segmenter made of each line: the toy language
    # has no final punctuation, so English rules cut no pair into its two sentences
    cut = (run / "test*2@decode.split=sentences,decode.split_lang=en.hyp").read_text()
    cut = cut.splitlines()
    fewer = figures["test*2@decode.split=sentences,decode.split_lang=en, cut into fewer"]
    assert fewer["lines"] == 7 and fewer["same_as_single"] == sum(a == b for a, b in zip(cut, two))
    assert fewer["bleu"] == sacrebleu.corpus_bleu(cut, [refs2]).score
    assert fewer["single_bleu"] == figures["test*2 from single outputs"]["bleu"]
    assert "test*2@decode.split=sentences,decode.split_lang=en, cut into each" not in figures


def test_segmentation_groups_lines_cut_into_each_fewer_and_more_pieces(tmp_path, monkeypatch):
    """A line the segmenter cut into more pieces than it joins sentences is not one
    cut into fewer: each sign of the difference is a group of its own."""
    cut = tmp_path / "x*2@decode.split=sentences.hyp"
    cut.write_text("a b c\nd e f\ng h i\n", encoding="utf-8")
    single, refs = ["a b c", "d e x", "g h i"], ["a b c", "d e f", "g h i"]
    got = script_module(SCRIPT, monkeypatch).by_segmentation(cut, [0, -1, 2], single, refs)
    assert {k.split(", ")[1]: (v["lines"], v["same_as_single"]) for k, v in got.items()} == {
        "cut into each": (1, 1),
        "cut into fewer": (1, 0),
        "cut into more": (1, 1),
    }


SHAPE_SCRIPT = SCRIPT.with_name("shape_offsets.py")


@pytest.mark.slow  # it decodes twice: seconds
def test_shape_offsets_at_zero_score_as_nmt_evaluate_and_move_the_positions(
    tiny_run, toy_dir, tmp_path, monkeypatch
):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    evaluate(run, ["test"], device="cpu")
    out = tmp_path / "offsets.json"
    argv = [str(SHAPE_SCRIPT), str(out), "test", str(run), "--offsets", "0:0", "3:5"]
    monkeypatch.setattr(sys, "argv", argv)
    script = script_module(SHAPE_SCRIPT, monkeypatch)
    script.main()
    figures = json.loads(out.read_text())[str(run)]
    hyps = (run / "test.hyp").read_text().splitlines()  # nmt evaluate's
    refs = (toy_dir / "test.tgt").read_text().splitlines()
    bleu = sacrebleu.corpus_bleu(hyps, [refs])
    assert figures["0:0"] == {
        "bleu": bleu.score,
        "chrf": sacrebleu.corpus_chrf(hyps, [refs]).score,
        "ratio": bleu.sys_len / bleu.ref_len,
    }
    assert set(figures) == {"0:0", "3:5"}
    # the moved model reads its sources from position 3 and its targets from 5; moved
    # again, the new offsets replace the old ones (the script moves one model per run)
    model = load_model(run, torch.device("cpu")).model
    src, encode = random_batch([4, 3]), model.encode
    memory, mask = script.moved(script.moved(model, 1, 2), 3, 5).encode(src)
    assert torch.equal(memory, encode(src, torch.full((2, 1), 3))[0])
    assert not torch.allclose(memory, encode(src)[0])
    assert model.decoder_state(memory, mask, src=src).shift.tolist() == [[5], [5]]


CONTROL_SCRIPT = SCRIPT.with_name("control_alignments.py")


def groups(links: set[tuple[int, int]]) -> list[list[int]]:
    """The target words of each linked source word, in a canonical order."""
    by_source: dict[int, list[int]] = {}
    for i, j in sorted(links):
        by_source.setdefault(i, []).append(j)
    return sorted(by_source.values())


@pytest.mark.parametrize("kind", ["shuffled", "diagonal"])
def test_control_alignments_keep_the_supervised_words_and_lose_what_they_say(
    kind, toy_dir, tmp_path, monkeypatch
):
    """Both controls supervise the target words gold supervises, and no others, with
    links inside each line's words. Shuffled keeps each target word's number of
    links, and each line's is one permutation of the source positions (the same
    file for the same seed); diagonal links each to the source word at its relative
    position."""
    from nmt.data.alignment import read_alignments

    corpus = tmp_path / "corpus"  # a few lines of the toy corpus, alignments as they are
    corpus.mkdir()
    for ext in ("src", "tgt", "align"):
        lines = (toy_dir / f"train.{ext}").read_text(encoding="utf-8").splitlines()[:50]
        (corpus / f"train.{ext}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out" / "control.align"
    argv = [str(CONTROL_SCRIPT), kind, str(corpus), str(out), "--seed", "3"]
    monkeypatch.setattr(sys, "argv", argv)
    script_module(CONTROL_SCRIPT, monkeypatch).main()  # as its last line calls it
    gold, made = read_alignments(corpus / "train.align"), read_alignments(out)
    src = (corpus / "train.src").read_text(encoding="utf-8").splitlines()
    tgt = (corpus / "train.tgt").read_text(encoding="utf-8").splitlines()
    assert len(made) == len(gold) == 50
    moved = 0
    for g, m, s, t in zip(gold, made, src, tgt):
        S, T = len(s.split()), len(t.split())
        assert {j for _, j in m} == {j for _, j in g}
        assert all(0 <= i < S and 0 <= j < T for i, j in m)
        if kind == "shuffled":  # a permutation of source positions: the groups of
            # target words that share a source word are gold's, under other words
            assert groups(m) == groups(g)
            moved += m != g
        else:
            assert m == {(round(j * (S - 1) / max(T - 1, 1)), j) for j in {j for _, j in g}}
    if kind == "shuffled":
        assert moved > 40  # a permutation of 5-40 words leaves a line as it was rarely
        again = tmp_path / "again.align"
        monkeypatch.setattr(sys, "argv", [*argv[:3], str(again), "--seed", "3"])
        script_module(CONTROL_SCRIPT, monkeypatch).main()
        assert again.read_bytes() == out.read_bytes()


def test_control_alignments_refuse_a_link_past_a_lines_words(tmp_path, monkeypatch):
    for ext, text in (("src", "a b\n"), ("tgt", "x y\n"), ("align", "0-0 2-1\n")):
        (tmp_path / f"train.{ext}").write_text(text, encoding="utf-8")
    out = tmp_path / "control.align"
    argv = [str(CONTROL_SCRIPT), "shuffled", str(tmp_path), str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as stop:
        script_module(CONTROL_SCRIPT, monkeypatch).main()
    assert str(stop.value) == f"error: {tmp_path / 'train.align'}:1: a link past the line's words"
    assert not out.exists()
