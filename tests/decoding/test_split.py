"""``decode.split: sentences`` (``nmt translate --split sentences``): one output line
per input line, each the translations of its sentences, the same as translating the
sentences one by one, for every attention kind; and the check that names outputs far
shorter than the run predicts."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.attention import ATTENTION
from nmt.data.corpus import read_lines
from nmt.data.sentences import attached, joiner, segmenter, split_lines
from nmt.decoding.length_check import is_short
from nmt.decoding.search import Options, translate_lines
from nmt.decoding.split import joined, translate_text
from nmt.errors import NmtError
from nmt.model.load import load_model
from nmt.setup.decoding import DecodeConfig
from tests.export.test_huggingface import variant
from tests.helpers import Heard
from tests.test_cli import invoke

word = st.sampled_from(["a", "dog", "runs", "the", "green", "park", "two", "men", "sit"])
# two words at least: "A. B." reads as initials, which pysbd rightly does not cut
sentence = st.lists(word, min_size=2, max_size=6).map(lambda w: " ".join(w).capitalize() + ".")


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(sentence, max_size=5), max_size=6))
def test_each_line_gets_back_exactly_its_own_sentences(paragraphs):
    lines = [" ".join(p) for p in paragraphs]
    sentences, owners = split_lines(lines, segmenter("en"))
    assert sorted(set(owners)) == list(range(len(lines))) and owners == sorted(owners)
    for i, p in enumerate(paragraphs):
        mine = [s for s, o in zip(sentences, owners) if o == i]
        assert mine == (p or [""])  # an empty line is one empty "sentence"


piece = st.text(alphabet='ab.!?“”"。，', min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(st.lists(piece, max_size=6))
def test_a_piece_without_a_letter_is_attached_to_a_sentence(pieces):
    """No piece is left that holds no letter or digit (unless none does), and the
    pieces' characters stay, in order."""
    out = attached(pieces)
    assert "".join(out) == "".join(pieces)
    if any(c.isalnum() for p in pieces for c in p):
        assert all(any(c.isalnum() for c in p) for p in out)
    else:
        assert len(out) == min(len(pieces), 1)


def test_a_closing_quotation_mark_stays_with_its_sentence():
    """pysbd cuts Chinese ``。”`` between the full stop and the quotation mark (a
    line of the Wikipedia zh-en test articles)."""
    said = ["她谈道：“爱情是没有界限的。", "我不介意你有一个阴道还是雌雄同体。”"]
    assert segmenter("zh")("".join(said)) == said


def test_joined_outputs_put_each_lines_sentences_back_in_order():
    from nmt.decoding.search import Translation

    each = [[Translation(t, -1.0, [k])] for k, t in enumerate(["A.", "B.", "", "C."])]
    (a,), (b,), (c,) = joined(each, [0, 0, 1, 2], 3, " ")
    assert (a.text, a.tokens, a.score) == ("A. B.", [0, 1], -2.0)
    assert (b.text, b.tokens) == ("", [2]) and c.text == "C."
    assert joiner("zh") == "" and joiner("de") == " "


@pytest.mark.slow
@pytest.mark.parametrize("kind", ATTENTION.names())
def test_split_then_translate_equals_each_sentence_translated_alone(
    kind, tiny_run, toy_dir, tmp_path
):
    path = variant(tiny_run, tmp_path / "model.pt", attention={"kind": kind})
    loaded = load_model(path, torch.device("cpu"))
    toy = read_lines(toy_dir / "test.src")[:7]
    # toy sentences end without a stop: each line is 1-3 of them, each ended with one
    lines = [". ".join(toy[i : i + n]) + "." for i, n in zip((0, 1, 3, 6), (1, 2, 3, 1))]
    lines.insert(2, "")
    cfg = DecodeConfig(beam=2, max_len_a=0.5, max_len_b=4, split="sentences", split_lang="en")
    heard = Heard()  # a bar counts lines, fed the sentences' work
    split = translate_text(loaded, loaded.model, lines, cfg, torch.device("cpu"), Options(heard))
    assert len(split) == len(lines) and split[2][0].text == ""
    planned, work = heard.plan()
    assert planned == len(lines) and work > 0
    plain = dataclasses.replace(cfg, split="none")
    for line, (got,) in zip(lines, split):
        alone = [
            translate_lines(
                loaded.model, loaded.vocabs.src, loaded.vocabs.tgt, [s], plain, torch.device("cpu")
            )[0][0]
            for s in segmenter("en")(line)
        ]
        assert got.text == " ".join(t.text for t in alone if t.text), line
        assert got.tokens == [p for t in alone for p in t.tokens]


def test_a_language_without_rules_is_one_line_naming_the_key(tiny_run, toy_dir, tmp_path):
    """Refused before any work: no output file, no progress line, one line of error,
    from translate and from evaluate alike; so is the oracle length, which has no
    reference per sentence."""
    src, out = toy_dir / "test.src", tmp_path / "out.txt"
    result = invoke("translate", tiny_run, "-i", src, "-o", out, "--split", "sentences")
    assert result.exit_code == 2 and not out.exists()
    (line,) = result.output.strip().splitlines()
    assert "decode.split_lang 'src': no sentence rules for this language" in line
    result = invoke("evaluate", tiny_run, "--set", "decode.split=sentences")
    assert result.exit_code == 2 and not list(tiny_run.glob("*@decode.split=sentences.hyp"))
    (line,) = result.output.strip().splitlines()
    assert "decode.split_lang 'src': no sentence rules for this language" in line
    oracle = ["--length", "oracle", "--ref", toy_dir / "test.tgt", "--split-lang", "en"]
    result = invoke("translate", tiny_run, "-i", src, "-o", out, "--split", "sentences", *oracle)
    assert result.exit_code == 2 and not out.exists()
    (line,) = result.output.strip().splitlines()
    assert "--length oracle: a reference's length is that of the whole line" in line
    result = invoke("translate", tiny_run, "-i", src, "--split", "none", "--split-lang", "en")
    assert result.exit_code == 2 and "--split-lang: only --split sentences and" in result.output
    # without --split, the run's decode.split decides: 'none' here, so no effect
    result = invoke("translate", tiny_run, "-i", src, "--split-lang", "en")
    assert result.exit_code == 2 and "decode.split_lang: has no effect" in result.output
    # where decode.split cuts (as a recipe's may), --split-lang alone names its rules
    cut = ["--set", "decode.split=sentences", "--split-lang", "en"]
    result = invoke("translate", tiny_run, "-i", src, "-o", out, *cut)
    assert result.exit_code == 0 and len(out.read_text().splitlines()) == len(read_lines(src))
    with pytest.raises(NmtError, match=r"decode\.split_lang 'xx'"):
        segmenter("xx")


def test_outputs_far_shorter_than_predicted_are_named_and_reported(tiny_run, toy_dir, tmp_path):
    """Lines of several toy sentences, translated by a model whose outputs are cut at
    4 pieces (as a model trained on single sentences stops after about one): every
    line under half its predicted length is named on stderr and in --report."""
    toy = read_lines(toy_dir / "test.src")[:9]
    src = tmp_path / "joined.src"
    src.write_text("".join(" ".join(toy[i : i + 3]) + "\n" for i in range(0, 9, 3)) + "la\n")
    report = tmp_path / "lengths.jsonl"
    cut = ["--set", "decode.max_len_a=0", "--set", "decode.max_len_b=4", "--beam", "1"]
    result = invoke("translate", tiny_run, "-i", src, *cut, "--report", report)
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) == 4
    rows = [json.loads(x) for x in report.read_text().splitlines()]
    assert [r["line"] for r in rows] == [1, 2, 3, 4]
    ratio = load_model(tiny_run, torch.device("cpu")).cfg.decode.length_ratio
    assert ratio is not None and 0.5 < ratio < 2  # measured on the training pairs
    for r in rows:
        assert r["output_pieces"] <= 4 and r["predicted"] == round(ratio * r["source_pieces"], 1)
        assert r["short"] == (r["output_pieces"] < 0.5 * ratio * r["source_pieces"])
    assert [r["short"] for r in rows[:3]] == [True] * 3  # 30+ source pieces, 4 out
    assert "3 of 4 output lines have under 0.5 of the length" in " ".join(result.stderr.split())
    assert "(line 1, 2, 3)" in result.stderr and "--split sentences" in result.stderr
    quiet = invoke("translate", tiny_run, "-i", src, *cut, "--set", "decode.short=0")
    assert quiet.exit_code == 0 and "output lines have under" not in quiet.stderr


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_under_split_a_long_line_is_predicted_from_every_sentence(tiny_run, toy_dir, tmp_path):
    """--split sentences reads a line longer than the model's positions whole, sentence
    by sentence: its predicted length counts every sentence's pieces. It counted the
    255 the model reads at once, and a long line's short output went unnamed."""
    sentences = [f"{s}." for s in read_lines(toy_dir / "test.src")[:3]] * 40
    src = tmp_path / "long.src"
    src.write_text(" ".join(sentences) + "\n" + "\n".join(sentences) + "\n")
    report = tmp_path / "lengths.jsonl"
    cut = ["--set", "decode.max_len_a=0", "--set", "decode.max_len_b=4", "--beam", "1"]
    split = ["--split", "sentences", "--split-lang", "en", "--report", report]
    result = invoke("translate", tiny_run, "-i", src, *cut, *split)
    assert result.exit_code == 0, result.output
    whole, *alone = [json.loads(x) for x in report.read_text().splitlines()]
    assert whole["source_pieces"] == sum(r["source_pieces"] for r in alone) > 255
    # at most 4 pieces a sentence: every line is short, the long one too (predicted
    # from the 255 pieces read at once, its output was not short)
    assert whole["short"] and all(r["short"] for r in alone)
    assert "121 of 121 output lines" in result.stderr


def test_the_check_needs_a_measured_ratio():
    assert not is_short(DecodeConfig(), 40, 1)  # a run from before the ratio was kept
    assert is_short(DecodeConfig(length_ratio=1.0), 40, 19)
    assert not is_short(DecodeConfig(length_ratio=1.0), 40, 20)


@pytest.mark.slow  # trains and translates: a second or more
def test_a_sentence_group_model_trains_and_translates_marked_lines_through_the_cli(
    tiny_recipe, tiny_run, toy_dir, tmp_path
):
    """Trained with joined examples and a group layer, it reads each line whole with
    its sentences marked: one output line per input line, a one-sentence line read as
    without marks, and no separator in any text; a model without groups is refused."""
    recipe = tiny_recipe(
        model={"decoder_layers": 2, "decoder": {"group_layers": 1}},
        data={"join": {"prob": 0.5, "max_k": 3}},
    )
    result = invoke("train", recipe, "--device", "cpu")
    assert result.exit_code == 0, result.output
    run = tmp_path / "run"
    loaded = load_model(run, torch.device("cpu"))
    assert loaded.vocabs.src.separator == loaded.model.separators[0] == len(loaded.vocabs.src) - 1
    toy = read_lines(toy_dir / "test.src")[:5]
    lines = [toy[0] + ".", f"{toy[1]}. {toy[2]}. {toy[3]}.", "", toy[4] + "."]
    src = tmp_path / "paragraphs.src"
    src.write_text("".join(line + "\n" for line in lines))
    out = tmp_path / "out.tgt"
    marks = ["--split", "marks", "--split-lang", "en", "--beam", "1"]
    result = invoke("translate", run, "-i", src, "-o", out, *marks)
    assert result.exit_code == 0, result.output
    got = out.read_text().split("\n")[:-1]
    assert len(got) == len(lines) and got[2] == "" and "<sep>" not in "".join(got)
    cfg = DecodeConfig(beam=1, split="marks", split_lang="en")
    marked = translate_text(loaded, loaded.model, lines, cfg, torch.device("cpu"))
    plain = translate_text(loaded, loaded.model, lines, DecodeConfig(beam=1), torch.device("cpu"))
    assert [m[0].text for m in marked] == got
    for i in (0, 3):  # one sentence: nothing to mark
        assert marked[i][0].tokens == plain[i][0].tokens
    refused = invoke("translate", tiny_run, "-i", src, *marks)
    (line,) = refused.output.strip().splitlines()  # before any work: no progress line
    assert refused.exit_code == 2 and "decode.split marks: this model has no sentence" in line
