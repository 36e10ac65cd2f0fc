"""The catalogue of bad input: each case is one line naming the file, line or key,
exit code 2, no traceback, and nothing half-written."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import stat
import threading
import zipfile
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from nmt.cli import app
from nmt.errors import NmtError
from tests.conftest import tiny_recipe_dict

runner = CliRunner()


def fails_cleanly(
    args: list, expect: str, input: str | bytes | None = None, after_logs: bool = False
) -> str:
    """Exit 2 with one line of error (``after_logs``: the last line, after progress)."""
    result = runner.invoke(app, [str(a) for a in args], input=input)
    out = result.output
    lines = out.strip().splitlines()
    assert result.exit_code == 2, out
    assert "Traceback" not in out and (len(lines) == 1 or after_logs), out
    assert lines[-1].startswith("error: ") and expect in lines[-1], out
    return out


# ------------------------------------------------------------------ recipes

RECIPE_CASES = {
    "not yaml": ("data: [unclosed", "not valid YAML"),
    "not a mapping": ("- a\n- b\n", "must be a YAML mapping"),
    "key twice": (
        "model:\n  d_model: 32\n  heads: 2\n  d_model: 64\n",
        "line 4: key 'd_model' given twice (first on line 2)",
    ),
    "misspelt key": ({"model": {"atention": {}}}, "did you mean 'model.attention'"),
    "unknown section": ({"trian": {}}, "did you mean 'train'"),
    "wrong type": ({"model": {"d_model": "big"}}, "model.d_model: expected an integer"),
    "out of range": ({"train": {"label_smoothing": 1.5}}, "train.label_smoothing: must be in"),
    "negative dropout": ({"model": {"dropout": -0.1}}, "model.dropout"),
    "seed over the bound": ({"train": {"seed": 2**64}}, "train.seed: must be in 0..2,147,483,647"),
    "heads do not divide": ({"model": {"heads": 3}}, "model.heads: must divide"),
    "unknown attention kind": (
        {"model": {"attention": {"kind": "lokal_p"}}},
        "did you mean 'local_p'",
    ),
    "option of another kind": (
        {"model": {"attention": {"kind": "global", "window": 3}}},
        "model.attention.window: an option of kind local_m and local_p",
    ),
    "contradictory early stopping": (
        {"train": {"valid_bleu": False, "early_stopping": "bleu"}},
        "train.early_stopping",
    ),
    "contradictory vocab": (
        {"data": {"vocab": {"joint": True, "src_model": "x.model"}}},
        "data.vocab.src_model",
    ),
    "missing data dir": ({"data": {"dir": "/nonexistent/corpus"}}, "data.dir: /nonexistent/corpus"),
    "missing split": ({"data": {"dev": "nosuchsplit"}}, "nosuchsplit.src: no such file"),
    "no budget": ({"train": {"max_steps": None}}, "set a budget"),
    "no steps between saves": ({"train": {"save_every": 0}}, "train.save_every: must be at least"),
    "absurd size": ({"model": {"d_model": 10**30}}, "model.d_model: must be at most 65,536"),
    "too big to train": (
        {"model": {"d_model": 8192, "ffn": 2**20, "heads": 8}},
        "parameters need",
    ),
    "beam beyond the vocabulary": ({"decode": {"beam": 1000}}, "decode.beam: 1000 is more than"),
    # settings that could only fail after the whole training, refused before it
    "averaging more than is kept": (
        {"decode": {"average_last": 5}, "train": {"keep_checkpoints": 2}},
        "decode.average_last: 5 needs train.keep_checkpoints of at least 5 (it is 2)",
    ),
    "a split that is a path": (
        {"data": {"test": ["test", "../../elsewhere/x"]}},
        "data.test[1]: '../../elsewhere/x': a name of files in data.dir, not a path",
    ),
    "positions fewer than a training sentence": (
        {"model": {"max_positions": 16}, "data": {"max_len": 100}},
        "model.max_positions: 16 is too few for data.max_len 100",
    ),
    "an n-best list for BPE-dropout": (
        {"data": {"vocab": {"type": "bpe", "sampling": {"alpha": 0.1, "nbest_size": 8}}}},
        "data.vocab.sampling.nbest_size: has no effect: BPE-dropout samples no n-best list",
    ),
}


def test_a_variant_named_twice_in_a_compare_spec_is_refused(toy_dir, tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text(yaml.safe_dump(tiny_recipe_dict(toy_dir, tmp_path / "run")))
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"base: {base}\nout_dir: {tmp_path / 'out'}\nvariants:\n"
        "  global: []\n  local: [model.attention.kind=local_m]\n"
        "  global: [model.attention.kind=hard]\n"
    )
    fails_cleanly(["compare", spec], "line 6: key 'global' given twice (first on line 4)")
    assert not (tmp_path / "out").exists()


# Checked once the vocabulary is trained (its size matters), after its log line.
AFTER_THE_VOCABULARY = {"too big to train", "beam beyond the vocabulary"}


@pytest.mark.parametrize("case", RECIPE_CASES, ids=list(RECIPE_CASES))
def test_bad_recipe(case, toy_dir, tmp_path):
    change, expect = RECIPE_CASES[case]
    path = tmp_path / "r.yaml"
    if isinstance(change, str):
        path.write_text(change)
    else:
        recipe = tiny_recipe_dict(toy_dir, tmp_path / "run")
        for section, values in change.items():
            recipe[section] = {**recipe.get(section, {}), **values} if values else values
        path.write_text(yaml.safe_dump(recipe))
    fails_cleanly(["train", path], expect, after_logs=case in AFTER_THE_VOCABULARY)
    assert not (tmp_path / "run" / "last.pt").exists()


# --------------------------------------------------------------------- data


def corpus(tmp_path: Path, toy_dir: Path, damage: str) -> Path:
    d = tmp_path / "corpus"
    shutil.copytree(toy_dir, d)
    train = d / "train.src"
    if damage == "line count":
        train.write_text(train.read_text() + "one more line\n")
    elif damage == "bad byte":
        lines = train.read_bytes().split(b"\n")
        lines[4] = b"caf\xe9 au lait"
        train.write_bytes(b"\n".join(lines))
    elif damage == "empty files":
        train.write_text("")
        (d / "train.tgt").write_text("")
    elif damage == "all-empty lines":
        n = len((d / "train.tgt").read_text().splitlines())
        train.write_text("\n" * n)
    elif damage == "directory":
        train.unlink()
        train.mkdir()
    elif damage == "broken gzip":
        train.unlink()
        (d / "train.src.gz").write_bytes(gzip.compress(b"a\nb\n")[:15])
    elif damage == "corrupt deflate":  # zlib.error, not OSError
        data = gzip.compress(train.read_bytes())
        train.unlink()
        (d / "train.src.gz").write_bytes(data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    elif damage == "empty dev":
        (d / "val.src").write_text("")
        (d / "val.tgt").write_text("")
    elif damage == "blank dev":
        n = len((d / "val.src").read_text().splitlines())
        (d / "val.src").write_text("\n" * n)
    elif damage == "empty test":
        (d / "test.src").write_text("")
        (d / "test.tgt").write_text("")
    elif damage == "uneven test":
        (d / "test.tgt").write_text("".join((d / "test.tgt").read_text().splitlines(True)[1:]))
    elif damage == "bad byte in test":
        (d / "test.src").write_bytes(b"caf\xe9\n" + (d / "test.src").read_bytes())
    return d


DATA_CASES = {
    "line count": "has 301 lines but",
    "bad byte": "train.src:5: not UTF-8 text (byte 0xe9",
    "empty files": "empty training set",
    "all-empty lines": "empty training set",
    "directory": "train.src: is a directory",
    "broken gzip": "train.src.gz: cannot read",
    "corrupt deflate": "train.src.gz: cannot read",
    # dev and test splits are checked before training, not when it validates or ends
    "empty dev": "val.src: empty file; split 'val' needs at least one line",
    "blank dev": "val.src: no dev pair to validate on",
    "empty test": "test.src: empty file; split 'test' needs at least one line",
    "uneven test": "test.src has 15 lines but",
    "bad byte in test": "test.src:1: not UTF-8 text (byte 0xe9",
}


@pytest.mark.parametrize("damage", DATA_CASES, ids=list(DATA_CASES))
def test_bad_data(damage, toy_dir, tmp_path):
    d = corpus(tmp_path, toy_dir, damage)
    recipe = tiny_recipe_dict(d, tmp_path / "run")
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    fails_cleanly(["train", tmp_path / "r.yaml"], DATA_CASES[damage], after_logs=True)
    assert not (tmp_path / "run" / "last.pt").exists()


def test_extremely_long_training_lines_are_dropped_with_a_count(toy_dir, tmp_path):
    d = tmp_path / "corpus"
    shutil.copytree(toy_dir, d)
    for side in ("src", "tgt"):
        lines = (d / f"train.{side}").read_text().splitlines()
        lines[0] = " ".join(["lo"] * 5000)
        (d / f"train.{side}").write_text("\n".join(lines) + "\n")
    recipe = tiny_recipe_dict(d, tmp_path / "run", train={"max_steps": 1, "valid_every": 1})
    recipe["data"]["test"] = []
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    result = runner.invoke(app, ["train", str(tmp_path / "r.yaml")])
    assert result.exit_code == 0, result.output
    assert "dropped 0 empty and 1 over-long" in result.output


# -------------------------------------------------------------- checkpoints


def bad_checkpoint(tmp_path: Path, tiny_run: Path, kind: str) -> Path:
    path = tmp_path / "model.pt"
    good = (tiny_run / "best.pt").read_bytes()
    if kind == "not a checkpoint":
        path.write_text("hello")
    elif kind == "a recipe":
        path = tmp_path / "recipe.yaml"
        path.write_text("run_dir: runs/x\n")
    elif kind == "truncated":
        path.write_bytes(good[: len(good) // 3])
    elif kind == "incompatible version":
        payload = torch.load(tiny_run / "best.pt", weights_only=True)
        torch.save({**payload, "version": 99}, path)
    elif kind == "foreign":
        torch.save({"state_dict": {"w": torch.ones(2)}}, path)
    elif kind == "code in pickle":
        torch.save({"format": "nmt-checkpoint", "version": 1, "x": Exploit()}, path)
    elif kind == "directory without best.pt":
        path = tmp_path / "emptyrun"
        path.mkdir()
    elif kind == "a study's variant directory":
        path = tmp_path / "global"
        for seed in ("seed1", "seed2"):
            (path / seed).mkdir(parents=True)
            shutil.copy(tiny_run / "best.pt", path / seed / "best.pt")
    elif kind == "a run not yet validated":
        path = tmp_path / "young"
        path.mkdir()
        shutil.copy(tiny_run / "last.pt", path / "last.pt")
    elif kind == "weights of another size":
        payload = torch.load(tiny_run / "best.pt", weights_only=True)
        config = {**payload["config"], "model": {**payload["config"]["model"], "d_model": 64}}
        torch.save({**payload, "config": config}, path)
    elif kind == "flipped bytes":  # the same size, a few bits changed in the largest weights
        with zipfile.ZipFile(tiny_run / "best.pt") as archive:
            tensors = [m for m in archive.infolist() if "/data/" in m.filename]
            largest = max(tensors, key=lambda m: m.file_size)
        data = bytearray(good)
        for i in range(largest.header_offset + 300, largest.header_offset + 304):
            data[i] ^= 0x40
        path.write_bytes(bytes(data))
    elif kind in EDITS:
        payload = torch.load(tiny_run / "best.pt", weights_only=True)
        EDITS[kind](payload)
        torch.save(payload, path)
    return path


EDITS = {  # damage inside a readable checkpoint
    "no config": lambda p: p.pop("config"),
    "weights not a mapping": lambda p: p.update(model=[1]),
    "vocabulary not bytes": lambda p: p["vocab"].update(src=5),
    "NaN weights": lambda p: p["model"]["output.weight"].fill_(float("nan")),
    "weights of another dtype": lambda p: p["model"].update(
        {"output.weight": p["model"]["output.weight"].to(torch.int32)}
    ),
}


class Exploit:
    def __reduce__(self):
        return (shutil.rmtree, ("/nonexistent-target",))


CHECKPOINT_CASES = {
    "not a checkpoint": "not a readable checkpoint (a text file)",
    "a recipe": "not a readable checkpoint (a YAML file: a recipe is trained with nmt train",
    "truncated": "not a readable checkpoint",
    "incompatible version": "format version 99 is not supported",
    "foreign": "not an nmt checkpoint",
    "code in pickle": "refused to load",
    "directory without best.pt": "emptyrun: no best.pt (not a run directory)",
    "a study's variant directory": "global: no best.pt; it holds the runs seed1, seed2: name them",
    "a run not yet validated": "young: no best.pt; it has not validated yet: name its last.pt",
    "weights of another size": "weights do not fit the checkpoint's recipe: 39 of another shape",
    "no config": "not a usable checkpoint: no 'config' entry",
    "weights not a mapping": "not a usable checkpoint: a damaged (list) 'model' entry",
    "vocabulary not bytes": "(source vocabulary): not a SentencePiece model (damaged",
    "NaN weights": "damaged: tgt_embed.tokens.weight holds NaN or infinite values",
    "weights of another dtype": "damaged: output.weight is torch.int32, the model's is",
    "flipped bytes": "does not match its checksum (CRC-32)",
}


@pytest.mark.parametrize("kind", CHECKPOINT_CASES, ids=list(CHECKPOINT_CASES))
def test_bad_checkpoint(kind, tiny_run, tmp_path):
    path = bad_checkpoint(tmp_path, tiny_run, kind)
    out = fails_cleanly(["translate", path], CHECKPOINT_CASES[kind], input="lo nute\n")
    assert len(out) < 400 and "weights_only" not in out, out


@pytest.mark.parametrize(
    "kind", ["truncated", "code in pickle", "weights of another size", "flipped bytes", *EDITS]
)
@pytest.mark.parametrize("command", ["ensemble", "export", "export-hf", "average"])
def test_new_surfaces_name_a_bad_checkpoint_and_write_nothing(kind, command, tiny_run, tmp_path):
    path = bad_checkpoint(tmp_path, tiny_run, kind)
    out = tmp_path / "out"
    args = {
        "ensemble": ["translate", tiny_run, path, "-o", out],
        "export": ["export", path, "-o", out],
        "export-hf": ["export", path, "--format", "hf", "-o", out],
        "average": ["average", tiny_run / "best.pt", path, "-o", out],
    }[command]
    message = fails_cleanly(args, CHECKPOINT_CASES[kind], input="lo nute\n")
    assert str(path.name) in message and not out.exists()
    assert not list(tmp_path.glob(".*tmp*"))


# ---------------------------------------------------------------- translate


def translate(tiny_run: Path, data: bytes, tmp_path: Path):
    src = tmp_path / "in.txt"
    src.write_bytes(data)
    out = tmp_path / "out.txt"
    result = runner.invoke(
        app, ["translate", str(tiny_run), "-i", str(src), "-o", str(out), "--beam", "2"]
    )
    return result, out


@pytest.mark.parametrize(
    ("data", "lines"),
    [
        (b"", 0),
        (b"\n\n\n", 3),
        (b"lo nute\r\nla koma\r\n", 2),
        ("Ελληνικά 中文 العربية русский lo nute 🙂\n".encode(), 1),
        (("x" * 100_000 + "\n").encode(), 1),
        (b"no final newline", 1),
    ],
    ids=["empty", "empty lines", "crlf", "mixed scripts", "100k characters", "no newline"],
)
def test_translate_keeps_one_line_per_input_line(tiny_run, tmp_path, data, lines):
    result, out = translate(tiny_run, data, tmp_path)
    assert result.exit_code == 0, result.output
    assert out.read_text().count("\n") == lines


def test_translate_binary_input_is_refused_and_nothing_written(tiny_run, tmp_path):
    result, out = translate(tiny_run, b"ok line\n\x89PNG\r\n\x1a\n\x00\xff\xfe", tmp_path)
    assert result.exit_code == 2 and "in.txt:2: not UTF-8 text" in result.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("option", "expect"),
    [
        (["--beam", "5000"], "must be in 1..1024"),
        (["--beam", "500"], "--beam 500: more than the"),
        (["--n-best", "0"], "--n-best: must be between 1 and"),
        (["--beam", "2", "--n-best", "3"], "--n-best: must be between 1 and"),
        (["--alpha", "nan"], "--alpha: must be"),
        (["--batch-tokens", "0"], "--batch-tokens: must be in 1.."),
        (["--sample", "--seed", str(2**64)], "--seed: must be in 0..2,147,483,647"),
    ],
    ids=[
        "beam over the bound",
        "beam over the vocabulary",
        "n-best 0",
        "n-best over beam",
        "alpha not a number",
        "batch tokens 0",
        "seed over the bound",
    ],
)
def test_search_sizes_are_bounded(tiny_run, option, expect):
    fails_cleanly(["translate", tiny_run, *option], expect, input="lo nute\n")


def translate_into(run: Path, src: Path, out: Path | str):
    return runner.invoke(app, ["translate", str(run), "-i", str(src), "-o", str(out)])


def test_alignments_never_overwrite_the_input_or_the_translations(tiny_run, tmp_path):
    (tmp_path / "in.txt").write_text("a b c\n")
    link = tmp_path / "link.txt"
    link.symlink_to(tmp_path / "in.txt")
    for same, option in ((tmp_path / "out.txt", "-o"), (link, "-i")):
        args = ["-i", str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.txt")]
        result = runner.invoke(app, ["translate", str(tiny_run), *args, "--alignments", str(same)])
        assert result.exit_code == 2 and f"the same file as {option}" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "link.txt"]
    assert (tmp_path / "in.txt").read_text() == "a b c\n"


def test_the_output_never_replaces_the_input(tiny_run, tmp_path):
    (tmp_path / "in.txt").write_text("a b c\n")
    (tmp_path / "link.txt").symlink_to(tmp_path / "in.txt")
    for out in ("in.txt", "link.txt"):
        fails_cleanly(
            ["translate", tiny_run, "-i", tmp_path / "in.txt", "-o", tmp_path / out],
            "the same file as -i; the translation would replace the source",
        )
    assert (tmp_path / "in.txt").read_text() == "a b c\n"


@pytest.mark.parametrize("option", ["-o", "--report", "--alignments"])
def test_a_file_to_write_that_is_a_directory_is_refused_before_any_work(tiny_run, tmp_path, option):
    """--report DIR once failed after the translation was written (exit 2, the
    output there): refused first, nothing is written."""
    (tmp_path / "in.txt").write_text("lo nute\n")
    (tmp_path / "taken").mkdir()
    files = {"-o": tmp_path / "out.txt", option: tmp_path / "taken"}
    args = [a for pair in files.items() for a in pair]
    fails_cleanly(
        ["translate", tiny_run, "-i", tmp_path / "in.txt", *args],
        f"{option} {tmp_path / 'taken'}: a directory, not a file",
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "taken"]
    assert not any((tmp_path / "taken").iterdir())


def test_an_unknown_split_mode_names_the_option(tiny_run):
    fails_cleanly(
        ["translate", tiny_run, "--split", "words"], "--split words: one of none, sentences, marks"
    )


def test_attention_dir_that_is_a_file_is_refused_before_any_work(tiny_run, tmp_path):
    (tmp_path / "in.txt").write_text("lo nute\n")
    (tmp_path / "maps").write_text("mine")
    args = ["-i", tmp_path / "in.txt", "-o", tmp_path / "out.txt", "--attention-dir"]
    fails_cleanly(
        ["translate", tiny_run, *args, tmp_path / "maps"], "maps: a file, not a directory"
    )
    assert (tmp_path / "maps").read_text() == "mine" and not (tmp_path / "out.txt").exists()


def test_translate_output_keeps_special_files(tiny_run, tmp_path):
    """-o follows a symlink (its target is replaced, the link stays) and writes into a
    FIFO or a device directly instead of replacing it with a regular file."""
    (tmp_path / "in.txt").write_text("a b c\nd e\n")
    target, link = tmp_path / "target.txt", tmp_path / "link.txt"
    target.write_text("old\n")
    link.symlink_to(target)
    result = translate_into(tiny_run, tmp_path / "in.txt", link)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and target.read_text().count("\n") == 2
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    result = translate_into(tiny_run, tmp_path / "in.txt", fifo)
    reader.join(timeout=60)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(fifo.stat().st_mode) and received[0].count("\n") == 2
    result = translate_into(tiny_run, tmp_path / "in.txt", "/dev/null")
    assert result.exit_code == 0 and stat.S_ISCHR(os.stat("/dev/null").st_mode)


# -------------------------------------------------------------------- score


@pytest.mark.parametrize(
    ("hyp", "ref", "expect"),
    [("a\nb\n", "a\n", "has 2 lines but"), ("", "", "empty file, nothing to score")],
    ids=["line count", "empty files"],
)
def test_bad_score_input(tmp_path, hyp, ref, expect):
    (tmp_path / "h").write_text(hyp)
    (tmp_path / "r").write_text(ref)
    fails_cleanly(["score", tmp_path / "h", "--ref", tmp_path / "r"], expect)


def test_score_unknown_metric(tmp_path):
    (tmp_path / "h").write_text("a\n")
    fails_cleanly(
        ["score", tmp_path / "h", "--ref", tmp_path / "h", "--metrics", "meteor"],
        "--metrics: unknown meteor",
    )


@pytest.mark.parametrize(
    "target, expect",
    [
        ("recipe.yaml", "recipe.yaml: a file, not a run directory"),
        ("absent", "absent: no such directory"),
        ("young", "young: no best.pt; it has not validated yet"),
    ],
)
def test_evaluate_names_what_it_was_given_instead_of_a_run(tiny_run, tmp_path, target, expect):
    (tmp_path / "young").mkdir()
    shutil.copy(tiny_run / "last.pt", tmp_path / "young" / "last.pt")
    shutil.copy(tiny_run / "recipe.yaml", tmp_path / "recipe.yaml")
    fails_cleanly(["evaluate", tmp_path / target], expect)


# ------------------------------------------------------- derived run files


def test_a_damaged_results_json_is_rebuilt(tiny_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    (run / "results.json").write_text('{"test": {"bleu": 1')  # cut by a crash
    result = runner.invoke(app, ["evaluate", str(run), "--split", "test"])
    out = " ".join(result.output.split())
    assert result.exit_code == 0 and "results.json was damaged; rebuilding it" in out, out
    assert "bleu" in json.loads((run / "results.json").read_text())["test"]


@pytest.mark.parametrize("split", ["../outside/test", "/tmp/test", ".hidden", ""])
def test_a_split_that_is_a_path_is_refused_and_nothing_written_outside(tiny_run, tmp_path, split):
    """``RUN/{split}.hyp`` would have been written outside the run directory."""
    fails_cleanly(["evaluate", tiny_run, "--split", split], "a name of files in data.dir")
    assert not list(tiny_run.parent.glob("**/outside"))


def test_a_split_named_twice_is_evaluated_once(tiny_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    result = runner.invoke(app, ["evaluate", str(run), "--split", "test", "--split", "test"])
    assert result.exit_code == 0 and result.output.count("test: BLEU") == 1, result.output


def test_evaluations_at_once_keep_each_other_scores(tmp_path, monkeypatch):
    """Split a's evaluation is paused while it writes results.json; split b's, which
    finishes meanwhile, must wait and merge into what a wrote, not over it."""
    from nmt.decoding import evaluate

    inside, go_on = threading.Event(), threading.Event()
    write_text = evaluate.write_text

    def slow_write(path, text):
        if '"a"' in text:
            inside.set()
            go_on.wait(10)
        write_text(path, text)

    monkeypatch.setattr(evaluate, "write_text", slow_write)
    a = threading.Thread(target=evaluate.record, args=(tmp_path, "a", {"bleu": 1.0}))
    a.start()
    assert inside.wait(10)
    b = threading.Thread(target=evaluate.record, args=(tmp_path, "b", {"bleu": 2.0}))
    b.start()
    b.join(0.3)
    assert b.is_alive()  # waiting for a
    go_on.set()
    a.join(10)
    b.join(10)
    assert json.loads((tmp_path / "results.json").read_text()) == {
        "a": {"bleu": 1.0},
        "b": {"bleu": 2.0},
    }


def test_damaged_summary_and_requested_recipe_are_named(tiny_run, tmp_path):
    from nmt.compare.analysis import training_figures
    from nmt.launch.runs import check_reusable, finished_run
    from nmt.setup.compare import PlannedRun

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    (run / "summary.json").write_bytes(b"\x00\x00")
    assert not finished_run(run)  # compare resumes the run, which rewrites it
    train, _ = training_figures(run)  # or, for --runs, reads the metrics log instead
    assert train["steps"] == 2
    (run / "requested.yaml").write_text("model: [unclosed")
    planned = PlannedRun("global", 1, run, {}, None)
    with pytest.raises(NmtError, match=r"requested\.yaml: damaged"):
        check_reusable(planned)


def test_damaged_lines_of_a_metrics_log_are_named_not_dropped_silently(tiny_run, tmp_path, capsys):
    """A resumed run's log is rewritten whole, so a finished run's damaged line is
    damage: its dev curve is read from the rest, and the study says which lines."""
    from nmt.compare.analysis import training_figures

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    log = run / "metrics.jsonl"
    lines = log.read_text().splitlines()
    _, curve = training_figures(run)
    assert capsys.readouterr().err == ""
    log.write_text(
        "\n".join([lines[0], '{"step": 1, "lo', *lines[1:], '{"valid_loss": "x"}']) + "\n"
    )
    _, damaged_curve = training_figures(run)
    assert damaged_curve == curve
    assert capsys.readouterr().err == (
        f"warning: {log}: lines 2, {len(lines) + 2} damaged, left out of the run's figures\n"
    )


def test_running_out_of_memory_is_one_line(tiny_run, tmp_path, monkeypatch):
    """As with ``-i /dev/zero``, one endless line: a MemoryError, not a traceback."""
    import nmt.decoding.translate

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(nmt.decoding.translate, "translate_file", exhausted)
    fails_cleanly(["translate", tiny_run, "-i", "/dev/zero"], "out of memory: an input line")


@pytest.mark.parametrize(
    "command, given, expect",
    [
        ("train", "run", "a directory, not a YAML file; its run's recipe is"),
        ("train", "best.pt", "a checkpoint (or another zip archive), not a YAML file"),
        ("train", "spec", "a comparison spec, not a recipe; run it with: nmt compare"),
        ("compare", "recipe", "a recipe, not a comparison spec; train it with nmt train"),
        ("compare", "run", "a directory, not a spec; to compare existing runs: nmt compare --runs"),
        ("data prepare", "spec", "a comparison spec, not a recipe"),
    ],
)
def test_a_file_of_the_other_kind_is_named_as_such(tiny_run, command, given, expect):
    """Each used to be an unknown key (``base``; ``run_dir``, "did you mean out_dir?"),
    "not a file" or "not UTF-8 text"."""
    path = {
        "run": tiny_run,
        "best.pt": tiny_run / "best.pt",
        "spec": Path(__file__).resolve().parents[1] / "recipes" / "compare-toy.yaml",
        "recipe": tiny_run / "recipe.yaml",
    }[given]
    fails_cleanly([*command.split(), path], expect)
