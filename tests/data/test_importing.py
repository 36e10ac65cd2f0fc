"""``nmt data import``: TSV, JSON lines and saved Hugging Face datasets become the
``{split}.{lang}`` files the rest of nmt reads; a damaged record writes nothing."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from nmt.cli import app
from nmt.data.corpus import read_parallel, split_path
from nmt.data.importing import BREAKS, ImportOptions, Sides, import_corpus, names_sides
from nmt.errors import NmtError
from nmt.io.files import JOURNAL, WRITING
from nmt.io.rundir import owned
from tests.conftest import require_extra

DE_EN = Sides("de", "en")
runner = CliRunner()


def segments() -> st.SearchStrategy[str]:
    """Text that survives as one line: no line break of any kind, no tab, not blank."""
    chars = st.characters(blacklist_characters=BREAKS + "\t", blacklist_categories=("Cs",))
    return st.text(chars, min_size=1, max_size=30).map(str.strip).filter(bool)


@settings(max_examples=30, deadline=None)
@given(pairs=st.lists(st.tuples(segments(), segments()), min_size=1, max_size=8))
def test_tsv_and_jsonl_round_trip_any_text(tmp_path_factory, pairs):
    """Whatever one-line text a pair holds, both formats give it back line for line."""
    assume(not names_sides(*pairs[0], DE_EN))  # a header: refused, tested below
    tmp = tmp_path_factory.mktemp("import")
    (tmp / "train.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    rows = [{"translation": {"de": s, "en": t}} for s, t in pairs]
    (tmp / "dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    import_corpus(tmp / "train.tsv", tmp / "out", "tsv", DE_EN)
    import_corpus(tmp / "dev.jsonl", tmp / "out", "jsonl", DE_EN)
    expected = ([s for s, _ in pairs], [t for _, t in pairs])
    for split in ("train", "dev"):
        assert read_parallel(tmp / "out" / f"{split}.de", tmp / "out" / f"{split}.en") == expected


def test_jsonl_fields_gzip_and_a_renamed_split(tmp_path):
    rows = [{"id": 1, "src": " Ein Hund ", "tgt": "A dog"}, {"id": 2, "src": "Ja", "tgt": "Yes"}]
    with gzip.open(tmp_path / "pairs.jsonl.gz", "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    sides = Sides("de", "en", src_field="src", tgt_field="tgt")
    counts = import_corpus(
        tmp_path / "pairs.jsonl.gz", tmp_path / "out", "jsonl", sides, ImportOptions(("val",))
    )
    assert counts == {"val": {"pairs": 2, "empty": 0}}
    assert (tmp_path / "out/val.de").read_text() == "Ein Hund\nJa\n"  # stripped
    assert (tmp_path / "out/val.en").read_text() == "A dog\nYes\n"


@pytest.mark.parametrize(
    ("fmt", "text", "error"),
    [
        ("tsv", "a\tb\nc\td\te\n", r"train\.tsv:2: 2 tabs"),
        ("tsv", "a\tb\nno tab here\n", r"train\.tsv:2: 0 tabs"),
        ("tsv", "a\tb\n\tb\n", r"train\.tsv:2: the source is empty"),
        ("tsv", "a\tb\nc\rd\te\n", r"train\.tsv:2: the source holds a line break"),
        ("tsv", "a\tb\nc\tx\u2028y\n", r"train\.tsv:2: the target holds a line break"),
        ("tsv", "a\tb\n\xff\n", r"train\.tsv:2: not UTF-8"),
        ("jsonl", '{"de": "a", "en": "b"}\n{"de": "a",\n', r"train\.jsonl:2: not JSON"),
        ("jsonl", '{"de": "a", "en": "b"}\n[1, 2]\n', r"train\.jsonl:2: expected a JSON object"),
        ("jsonl", '{"de": "a", "en": 3}\n', r"train\.jsonl:1: the target is int"),
        ("jsonl", '{"de": "a", "fr": "b"}\n', r"train\.jsonl:1: no field 'en' \(fields: de, fr\)"),
        ("jsonl", '{"translation": "a b"}\n', r"train\.jsonl:1: translation is not an object"),
        ("jsonl", '{"de": "a\\nb", "en": "c"}\n', r"train\.jsonl:1: the source holds a line break"),
        ("jsonl", "\n", r"train\.jsonl:1: not JSON"),
        (
            "jsonl",
            '{"de": "a", "en": "b", "n": ' + "9" * 5000 + "}\n",
            r"train\.jsonl:1: not readable JSON \(Exceeds the limit",
        ),
        (
            "jsonl",
            "[" * 100_000 + "]" * 100_000 + "\n",
            r"train\.jsonl:1: not readable JSON \(nested too deeply\)",
        ),
        (
            "jsonl",
            '{"de": "a\\ud800", "en": "b"}\n',
            r"train\.jsonl:1: the source holds '\\ud800', half of a UTF-16 pair",
        ),
    ],
)
def test_a_damaged_record_names_its_line_and_writes_nothing(tmp_path, fmt, text, error):
    source = tmp_path / f"train.{fmt}"
    source.write_bytes(text.encode("utf-8", "surrogateescape").replace(b"\xc3\xbf", b"\xff"))
    with pytest.raises(NmtError, match=error):
        import_corpus(source, tmp_path / "out", fmt, DE_EN)  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def visible(directory: Path) -> list[str]:
    """The files of a corpus directory (nmt's lock file is hidden)."""
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))


def test_a_byte_order_mark_is_not_kept_as_text(tmp_path):
    (tmp_path / "train.tsv").write_bytes("\ufeffEin Hund\tA dog\nJa\tYes\n".encode())
    import_corpus(tmp_path / "train.tsv", tmp_path / "out", "tsv", DE_EN)
    assert (tmp_path / "out/train.de").read_text(encoding="utf-8") == "Ein Hund\nJa\n"


def test_an_import_into_a_directory_another_is_writing_to_is_refused(tmp_path):
    """The check for files already there and the writes are one step under the
    directory's lock: a second import at the same time is refused, not interleaved."""
    (tmp_path / "train.tsv").write_text("a\tb\n")
    out = tmp_path / "out"
    refused = pytest.raises(NmtError, match=r"out: in use by another nmt process")
    with owned(out, key="OUT", lock=WRITING), refused:  # another import holds it
        import_corpus(tmp_path / "train.tsv", out, "tsv", DE_EN)
    import_corpus(tmp_path / "train.tsv", out, "tsv", DE_EN)
    assert (out / "train.en").read_text() == "b\n"


def test_a_set_of_files_cut_short_between_renames_is_completed_before_any_read(tmp_path):
    """A crash between the renames of one import leaves the journal; the next reader
    or writer completes them, so no split is ever half old, half new."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "train.de").write_text("old\n")
    (out / "train.en").write_text("old\n")
    (out / ".train.de.1.x.tmp").write_text("new\n")
    (out / ".train.en.1.x.tmp").write_text("new\n")
    renames = [[".train.de.1.x.tmp", "train.de"], [".train.en.1.x.tmp", "train.en"]]
    (out / JOURNAL).write_text(json.dumps(renames))
    os.replace(out / ".train.de.1.x.tmp", out / "train.de")  # the crash: one of two done
    assert read_parallel(split_path(out, "train", "de"), split_path(out, "train", "en")) == (
        ["new"],
        ["new"],
    )
    assert not (out / JOURNAL).exists() and visible(out) == ["train.de", "train.en"]


def test_empty_sides_are_left_out_only_when_asked(tmp_path):
    (tmp_path / "train.tsv").write_text("a\tb\n \tc\nd\t\ne\tf\n")
    counts = import_corpus(
        tmp_path / "train.tsv", tmp_path / "out", "tsv", DE_EN, ImportOptions(skip_empty=True)
    )
    assert counts == {"train": {"pairs": 2, "empty": 2}}
    assert (tmp_path / "out/train.de").read_text() == "a\ne\n"
    (tmp_path / "blank.tsv").write_text("\tb\n")
    with pytest.raises(NmtError, match="blank: no pairs to write"):
        import_corpus(
            tmp_path / "blank.tsv", tmp_path / "out", "tsv", DE_EN, ImportOptions(skip_empty=True)
        )


def test_existing_files_are_kept_unless_forced(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "train.en.gz").write_bytes(b"mine")
    (tmp_path / "train.tsv").write_text("a\tb\n")
    with pytest.raises(NmtError, match=r"train\.en\.gz: already there; not overwritten"):
        import_corpus(tmp_path / "train.tsv", out, "tsv", DE_EN)
    assert visible(out) == ["train.en.gz"]
    import_corpus(tmp_path / "train.tsv", out, "tsv", DE_EN, ImportOptions(force=True))
    assert (out / "train.en").read_text() == "b\n"


@pytest.mark.parametrize(
    ("sides", "splits", "error"),
    [
        (("de", "de"), [], "--tgt-lang 'de': must differ"),
        (("../de", "en"), [], r"--src-lang '../de': a file suffix"),
        (("de", "en"), ["a", "b"], "a tsv file is one split"),
        (("de", "en"), ["../x"], r"--split '../x': a split name"),
    ],
)
def test_bad_arguments_are_refused_before_reading(tmp_path, sides, splits, error):
    (tmp_path / "train.tsv").write_text("a\tb\n")
    with pytest.raises(NmtError, match=error):
        import_corpus(
            tmp_path / "train.tsv",
            tmp_path / "out",
            "tsv",
            Sides(*sides),
            ImportOptions(tuple(splits)),
        )


def test_a_saved_hugging_face_dataset(tmp_path):
    datasets = require_extra("datasets", "hf")
    rows = {
        "train": [{"de": "Ein Hund", "en": "A dog"}, {"de": "Zwei Katzen", "en": "Two cats"}],
        "validation": [{"de": "Ja", "en": "Yes"}],
    }
    saved = datasets.DatasetDict(
        {s: datasets.Dataset.from_dict({"translation": r}) for s, r in rows.items()}
    )
    saved.save_to_disk(str(tmp_path / "saved"))
    counts = import_corpus(
        tmp_path / "saved", tmp_path / "out", "hf", DE_EN, ImportOptions(("validation=val",))
    )
    assert counts == {"val": {"pairs": 1, "empty": 0}}
    assert read_parallel(tmp_path / "out/val.de", tmp_path / "out/val.en") == (["Ja"], ["Yes"])
    counts = import_corpus(tmp_path / "saved", tmp_path / "all", "hf", DE_EN)
    assert counts["train"]["pairs"] == 2 and counts["validation"]["pairs"] == 1
    with pytest.raises(NmtError, match=r"--split 'test': .*saved has train, validation"):
        import_corpus(tmp_path / "saved", tmp_path / "out", "hf", DE_EN, ImportOptions(("test",)))
    # a bad row in the second split leaves no file of the first either
    rows["validation"] = [{"de": "Ja", "en": "Yes\nNo"}]
    saved = datasets.DatasetDict(
        {s: datasets.Dataset.from_dict({"translation": r}) for s, r in rows.items()}
    )
    saved.save_to_disk(str(tmp_path / "bad"))
    with pytest.raises(NmtError, match=r"bad\[validation\] row 1: the target holds a line break"):
        import_corpus(tmp_path / "bad", tmp_path / "none", "hf", DE_EN)
    assert not (tmp_path / "none").exists()


def test_a_dataset_whose_split_names_a_path_writes_nothing_outside(tmp_path):
    datasets = require_extra("datasets", "hf")
    rows = [{"de": "Ja", "en": "Yes"}]
    saved = datasets.DatasetDict({"../x": datasets.Dataset.from_dict({"translation": rows})})
    saved.save_to_disk(str(tmp_path / "saved"))
    with pytest.raises(NmtError, match=r"its split '\.\./x' cannot name a file"):
        import_corpus(tmp_path / "saved", tmp_path / "out", "hf", DE_EN, ImportOptions(force=True))
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob("x.*"))
    import_corpus(tmp_path / "saved", tmp_path / "out", "hf", DE_EN, ImportOptions(("../x=train",)))
    assert (tmp_path / "out/train.en").read_text() == "Yes\n"


def test_a_damaged_arrow_file_is_one_line_naming_the_dataset(tmp_path):
    datasets = require_extra("datasets", "hf")
    rows = [{"de": f"a{i}", "en": f"b{i}"} for i in range(1000)]
    datasets.Dataset.from_dict({"translation": rows}).save_to_disk(str(tmp_path / "saved"))
    (arrow,) = (tmp_path / "saved").glob("*.arrow")
    data = bytearray(arrow.read_bytes())
    for i in range(len(data) // 2, len(data) - 400, 3):  # the data, not the schema
        data[i] = 0xFF
    arrow.write_bytes(bytes(data))
    with pytest.raises(NmtError, match=r"saved\[train\] row 1: damaged, cannot be read"):
        import_corpus(tmp_path / "saved", tmp_path / "out", "hf", DE_EN)
    assert not (tmp_path / "out").exists()


def test_the_command_line_reports_and_refuses_in_one_line(tmp_path):
    (tmp_path / "pairs.tsv").write_text("Ein Hund\tA dog\nJa\tYes\n")
    args = ["data", "import", str(tmp_path / "pairs.tsv"), str(tmp_path / "out"),
            "--format", "tsv", "--src-lang", "de", "--tgt-lang", "en"]  # fmt: skip
    result = runner.invoke(app, [*args, "--split", "train"])
    assert result.exit_code == 0, result.output
    assert "train: 2 pairs in" in result.stdout
    again = runner.invoke(app, [*args, "--split", "train"])
    assert again.exit_code == 2
    assert again.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "train.de: already there" in again.stderr
    assert Path(tmp_path / "out/train.de").read_text() == "Ein Hund\nJa\n"


@pytest.mark.parametrize("first", ["de\ten", "Source\tTarget ", "src\ttgt"])
def test_a_header_line_is_refused_unless_skipped(tmp_path, first):
    """A TSV's header names its columns; imported, it would be a pair of training data."""
    (tmp_path / "train.tsv").write_text(f"{first}\nEin Hund\tA dog\n")
    args = ["data", "import", str(tmp_path / "train.tsv"), str(tmp_path / "out"),
            "--src-lang", "de", "--tgt-lang", "en"]  # fmt: skip
    refused = runner.invoke(app, args)
    assert refused.exit_code == 2
    assert f"train.tsv:1: a header ({first.split(chr(9))[0]}, " in refused.stderr
    assert "--header skips it" in refused.stderr and not (tmp_path / "out").exists()
    result = runner.invoke(app, [*args, "--header"])
    assert result.exit_code == 0, result.output
    assert "train: 1 pair in" in result.stdout
    assert (tmp_path / "out/train.de").read_text() == "Ein Hund\n"


def test_a_header_is_a_tsv_option_and_a_first_pair_is_read_as_one(tmp_path):
    (tmp_path / "dev.jsonl").write_text(json.dumps({"de": "Ja", "en": "Yes"}) + "\n")
    with pytest.raises(NmtError, match="--header: only --format tsv has a header line"):
        import_corpus(
            tmp_path / "dev.jsonl", tmp_path / "out", None, DE_EN, ImportOptions(header=True)
        )
    (tmp_path / "dev.tsv").write_text("de\tYes\n")  # one cell a name, the other not: a pair
    import_corpus(tmp_path / "dev.tsv", tmp_path / "out", None, DE_EN)
    assert (tmp_path / "out/dev.en").read_text() == "Yes\n"


def test_an_import_into_a_run_directory_is_refused(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run/best.pt").write_bytes(b"")
    (tmp_path / "test.tsv").write_text("Ja\tYes\n")
    with pytest.raises(NmtError, match="run: holds a training run; import into a data directory"):
        import_corpus(tmp_path / "test.tsv", tmp_path / "run", None, DE_EN)
    assert visible(tmp_path / "run") == ["best.pt"]
