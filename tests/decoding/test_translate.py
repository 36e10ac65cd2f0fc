"""``translate`` emits exactly one line per input line, whatever the input."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nmt.decoding.translate
from nmt.data.corpus import decode_lines, read_lines
from nmt.data.vocab import CHARS_PER_PIECE, Vocab
from nmt.decoding.search import DecodeConfig, encode_source, translate_lines
from nmt.decoding.translate import format_output
from tests.helpers import line_text, tiny_model
from tests.test_cli import invoke


@pytest.fixture(scope="module")
def system(toy_dir):
    lines = read_lines(toy_dir / "train.src") + read_lines(toy_dir / "train.tgt")
    vocab = Vocab.train([*lines, "ünïcödé 中文 русский العربية"], size=120, model_type="unigram")
    torch.manual_seed(0)
    model = tiny_model()
    model.output = torch.nn.Linear(32, len(vocab), bias=False)
    model.tgt_embed.tokens = torch.nn.Embedding(len(vocab), 32, padding_idx=1)
    model.src_embed = model.tgt_embed
    model.cfg = dataclasses.replace(model.cfg, max_positions=64)
    return model.eval(), vocab


line = line_text(max_size=80)


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(line, max_size=6))
def test_one_output_line_per_input_line(system, lines):
    model, vocab = system
    raw = "".join(x + "\n" for x in lines).encode("utf-8")
    inputs = decode_lines(raw, "<stdin>")
    cfg = DecodeConfig(beam=2, max_len_a=0.0, max_len_b=6)
    out = format_output(
        translate_lines(model, vocab, vocab, inputs, cfg, torch.device("cpu")), None
    )
    assert len(inputs) == len(lines)  # a trailing CR (CRLF) is dropped, never a line
    assert out.count("\n") == len(inputs) and (out == "" or out.endswith("\n"))
    for src, hyp in zip(inputs, out.split("\n")):
        if src == "":
            assert hyp == ""


def translate_cli(tiny_run, src, *options):
    result = invoke("translate", tiny_run, "-i", src, *options)
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.slow  # translates a file twice: a second or more
def test_a_file_in_chunks_translates_as_one_piece(tiny_run, toy_dir, tmp_path, monkeypatch):
    """Chunks keep memory bounded on a large input; they must not change a line of any
    output: the translations, n-best numbering, alignments and attention files."""
    lines = read_lines(toy_dir / "test.src")[:9]
    src = tmp_path / "in.txt"
    src.write_text("\n".join([*lines[:4], "", *lines[4:]]) + "\n")
    outputs = {}
    for chunk in (10_000, 3):
        monkeypatch.setattr(nmt.decoding.translate, "CHUNK_LINES", chunk)
        out = tmp_path / str(chunk)
        options = ("--alignments", out / "links", "--attention-dir", out / "maps")
        translate_cli(tiny_run, src, "-o", out / "hyp", "--beam", "2", *options)
        translate_cli(tiny_run, src, "-o", out / "nbest", "--beam", "2", "--n-best", "2")
        outputs[chunk] = {p.name: p for p in sorted(out.rglob("*")) if p.is_file()}
    assert outputs[3].keys() == outputs[10_000].keys()
    assert len(outputs[3]) == 3 + 9  # hyp, links, nbest and a map per non-empty line
    for name, path in outputs[3].items():
        if name.endswith(".npz"):  # batched with other lines: equal up to rounding
            chunked, whole = np.load(path), np.load(outputs[10_000][name])
            for key in ("src", "tgt"):
                np.testing.assert_array_equal(chunked[key], whole[key])
            np.testing.assert_allclose(chunked["weights"], whole["weights"], atol=1e-5)
        else:
            assert path.read_bytes() == outputs[10_000][name].read_bytes(), name
    nbest = outputs[3]["nbest"].read_text().splitlines()
    expected = [i for i in range(10) for _ in range(1 if i == 4 else 2)]  # line 4 is empty
    assert [int(x.split(" ||| ")[0]) for x in nbest] == expected


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_sampling_draws_continue_across_chunks(tiny_run, toy_dir, tmp_path, monkeypatch):
    """The second chunk's draws follow the first's: the same line repeated gets
    different draws in different chunks, and the same command draws the same again."""
    monkeypatch.setattr(nmt.decoding.translate, "CHUNK_LINES", 1)
    src = tmp_path / "in.txt"
    src.write_text((read_lines(toy_dir / "test.src")[0] + "\n") * 6)
    options = ("--sample", "--temperature", "3")
    first = translate_cli(tiny_run, src, *options).stdout.splitlines()
    assert translate_cli(tiny_run, src, *options).stdout.splitlines() == first
    assert len(set(first)) > 1


def test_a_failure_mid_file_leaves_the_old_output(tiny_run, toy_dir, tmp_path, monkeypatch):
    """A bad byte far down the file is found before any translation; a failure in the
    middle (here, the second chunk) leaves the previous output and no temp file."""
    monkeypatch.setattr(nmt.decoding.translate, "CHUNK_LINES", 2)
    out = tmp_path / "hyp"
    out.write_text("previous\n")
    src = tmp_path / "in.txt"
    src.write_bytes(b"lo nute\n" * 5 + b"la \xff\n")
    calls = []
    translate = nmt.decoding.translate.translate_text

    def counted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise nmt.decoding.translate.NmtError("stopped in the second chunk")
        return translate(*args, **kwargs)

    monkeypatch.setattr(nmt.decoding.translate, "translate_text", counted)
    result = invoke("translate", tiny_run, "-i", src, "-o", out)
    assert result.exit_code == 2 and "in.txt:6: not UTF-8" in result.output and not calls
    src.write_bytes(b"lo nute\n" * 5)
    result = invoke("translate", tiny_run, "-i", src, "-o", out)
    assert result.exit_code == 2 and "stopped in the second chunk" in result.output
    assert out.read_text() == "previous\n" and sorted(tmp_path.iterdir()) == [out, src]


@pytest.mark.parametrize("unit", ["lo nute ", "a", "ünïcödé 中文 ", " " * 40 + "lo "])
def test_cutting_a_huge_line_before_encoding_keeps_the_pieces_the_model_reads(system, unit):
    """A line far past CHARS_PER_PIECE x (limit + 1) characters gives the first ``limit``
    pieces that encoding it whole gives, and counts as truncated; the next test checks
    that SentencePiece is given only the cut."""
    _, vocab = system
    limit, truncated = 20, []
    huge = unit * (CHARS_PER_PIECE * (limit + 1) // len(unit) + 1000)
    (cut,) = encode_source(vocab, [huge], limit, truncated.append)
    assert cut == vocab.encode([huge])[0][:limit] and truncated == [1]
    (short,) = encode_source(vocab, ["lo nute"], limit, truncated.append)
    assert short == vocab.encode(["lo nute"])[0] and truncated == [1]


def test_sentencepiece_never_sees_more_than_the_cut(system, monkeypatch):
    _, vocab = system
    seen = []
    encode = vocab.encode
    monkeypatch.setattr(vocab, "encode", lambda lines: seen.extend(lines) or encode(lines))
    encode_source(vocab, ["a" * 10**6], 20)
    assert max(map(len, seen)) == CHARS_PER_PIECE * 21


@pytest.mark.slow
def test_at_a_terminal_translate_prompts_and_answers_each_line(tiny_run):
    """Typed at a terminal (stdin a pseudo-terminal), each sentence is translated as
    soon as Enter is pressed, after a prompt, until Ctrl-D."""
    import os
    import pty
    import subprocess
    import sys
    import time

    from tests.conftest import subprocess_env

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nmt", "translate", str(tiny_run), "--device", "cpu"],
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=subprocess_env(),
    )
    os.close(follower)
    os.write(leader, b"lo nute miguge\n")
    first = proc.stdout.readline()  # answered before the next line is typed
    assert first.endswith(b"\n")
    os.write(leader, b"la koma\n")
    second = proc.stdout.readline()
    time.sleep(0.2)
    os.write(leader, b"\x04")  # Ctrl-D
    rest, err = proc.communicate(timeout=120)
    os.close(leader)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert rest == b"" and second.endswith(b"\n")
    assert err.decode().count("> ") == 3 and "Ctrl-D to end" in err.decode()
