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
