"""Real documents: ``nmt data import`` keeps document ids (a TSV's document column,
an XML's docid) in ``{split}.doc``; ``NAME~K`` joins K consecutive sentences of one
document; ``data.join.order: document`` joins training pairs within documents; the
data cache keeps each pair's document."""

from __future__ import annotations

import gzip
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nmt.data.corpus import read_lines
from nmt.data.importing import ImportOptions, Sides, import_corpus, tsv_columns
from nmt.data.joining import groups as join_groups
from nmt.data.pipeline import load_split
from nmt.data.splits import derive, documents, groups
from nmt.errors import NmtError
from nmt.setup.data import DataConfig, JoinConfig
from nmt.training.build import build
from nmt.training.run import train
from tests.test_cli import invoke

ZH_EN = Sides("zh", "en")


def test_a_tsv_with_a_document_column_writes_the_ids_line_by_line(tmp_path):
    rows = [("A", "s1", "S1", "一。", "One."), ("A", "s1", "S1", "二。", "Two."),
            ("B", "s2", "S2", "三。", "Three.")]  # fmt: skip
    (tmp_path / "dev.tsv").write_text("".join("\t".join(r) + "\n" for r in rows))
    columns = tsv_columns("doc,section,,src,tgt")
    counts = import_corpus(
        tmp_path / "dev.tsv", tmp_path / "out", None, ZH_EN, ImportOptions(columns=columns)
    )
    assert counts == {"dev": {"pairs": 3, "empty": 0}}
    assert read_lines(tmp_path / "out/dev.doc") == ["A", "A", "B"]
    assert read_lines(tmp_path / "out/dev.section") == ["s1", "s1", "s2"]
    assert read_lines(tmp_path / "out/dev.zh") == ["一。", "二。", "三。"]


@pytest.mark.parametrize(
    "text, columns, error",
    [
        ("A\tx\ty\nx\ty\n", "doc,src,tgt", r"dev\.tsv:2: 1 tabs; a TSV line here is 3 columns"),
        ("A\tx\ty\n \tx\ty\n", "doc,src,tgt", r"dev\.tsv:2: the doc id is empty"),
        ("x\ty\n", "src,src,tgt", "src named twice"),
        ("x\ty\n", "doc,tgt", "no src column"),
        ("x\ty\n", "src,tgt,title", "'title' is none of src, tgt, doc, section"),
    ],
)
def test_a_missing_or_bad_document_column_is_one_line(tmp_path, text, columns, error):
    (tmp_path / "dev.tsv").write_text(text)
    with pytest.raises(NmtError, match=error):
        import_corpus(
            tmp_path / "dev.tsv",
            tmp_path / "out",
            None,
            ZH_EN,
            ImportOptions(columns=tsv_columns(columns)),
        )
    assert not (tmp_path / "out").exists()


def xml(docs: dict[str, list[tuple[str, str]]]) -> str:
    body = "".join(
        f'<doc docid="{d}" genre="lectures"><title>t</title>'
        + "".join(f'<seg id="{i}"> {text} </seg>\n' for i, text in segs)
        + "</doc>\n"
        for d, segs in docs.items()
    )
    return f'<mteval><srcset setid="x" srclang="de">\n{body}</srcset></mteval>\n'


def test_an_iwslt_xml_pair_of_files_is_paired_by_document_and_segment(tmp_path):
    de = {"535": [("1", "Hallo &amp; willkommen."), ("2", "Danke.")], "7": [("1", "Ja.")]}
    en = {"535": [("2", "Thanks."), ("1", "Hello &amp; welcome.")], "7": [("1", "Yes.")]}
    with gzip.open(tmp_path / "tst.de-en.de.xml.gz", "wt") as f:
        f.write(xml(de))
    with gzip.open(tmp_path / "tst.de-en.en.xml.gz", "wt") as f:
        f.write(xml(en))
    import_corpus(tmp_path / "tst.de-en.de.xml.gz", tmp_path / "out", None, Sides("de", "en"))
    assert read_lines(tmp_path / "out/tst.de") == ["Hallo & willkommen.", "Danke.", "Ja."]
    assert read_lines(tmp_path / "out/tst.en") == ["Hello & welcome.", "Thanks.", "Yes."]
    assert read_lines(tmp_path / "out/tst.doc") == ["535", "535", "7"]
    en["7"] = [("2", "Yes.")]
    (tmp_path / "tst.de-en.en.xml.gz").unlink()
    (tmp_path / "tst.de-en.en.xml").write_text(xml(en))
    (tmp_path / "tst.de-en.de.xml").write_text(xml(de))
    with pytest.raises(NmtError, match=r"tst\.de-en\.en\.xml: doc 7 has no seg id 1"):
        import_corpus(tmp_path / "tst.de-en.de.xml", tmp_path / "bad", None, Sides("de", "en"))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 7), min_size=1, max_size=12), st.integers(1, 7))
def test_a_document_join_never_crosses_a_document_and_keeps_every_pair(lengths, k):
    docs = [f"d{i % 3}" for i, n in enumerate(lengths) for _ in range(n)]  # ids may recur
    src = [f"s{i}" for i in range(len(docs))]
    runs = documents(docs)
    if k > max(len(r) for r in runs):
        with pytest.raises(NmtError, match=f"K {k} is larger than any document"):
            groups(f"test~{k}", len(src), docs)
        return
    made = groups(f"test~{k}", len(src), docs)
    assert [i for g in made for i in g] == list(range(len(src)))  # every pair, in order
    for g in made:
        assert 1 <= len(g) <= k and len({docs[i] for i in g}) == 1
        assert any(g.start >= r.start and g.stop <= r.stop for r in runs)
    # a run's groups are K long but for its last, which holds what is left
    assert len(made) == sum(-(-len(r) // k) for r in runs)
    joined, _ = derive(f"test~{k}", src, src, docs)
    assert joined == [" ".join(src[i] for i in g) for g in made]


def test_a_split_without_document_ids_is_refused_naming_the_file(tmp_path):
    for lang in ("de", "en"):
        (tmp_path / f"test.{lang}").write_text("a\nb\nc\n")
    cfg = DataConfig(dir=str(tmp_path), src_lang="de", tgt_lang="en")
    with pytest.raises(NmtError, match=r"test has no document ids \(test\.doc"):
        load_split(cfg, "test~2")
    (tmp_path / "test.doc").write_text("x\nx\ny\n")
    assert load_split(cfg, "test~2") == (["a b", "c"], ["a b", "c"])
    (tmp_path / "test.doc").write_text("x\nx\n")
    with pytest.raises(NmtError, match=r"test\.doc: 2 lines, but test has 3"):
        load_split(cfg, "test~2")


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=10), st.integers(0, 3))
def test_joined_training_examples_stay_inside_their_document(runs, seed):
    docs = np.repeat(np.arange(len(runs)), runs)
    lengths = np.full((len(docs), 2), 3)
    cfg = JoinConfig(prob=0.7, max_k=4, order="document")
    members, starts = join_groups(lengths, cfg, max_len=100, seed=seed, epoch=1, docs=docs)
    assert sorted(members.tolist()) == list(range(len(docs)))
    for a, b in itertools.pairwise(starts):
        group = members[a:b]
        assert len(set(docs[group].tolist())) == 1 and list(group) == list(
            range(group[0], group[-1] + 1)
        )


def with_documents(toy_dir, tmp_path):
    """The toy corpus with document ids: runs of 1-9 consecutive lines."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for path in toy_dir.iterdir():
        (corpus / path.name).write_bytes(path.read_bytes())
    for split in ("train", "test"):
        n = len(read_lines(corpus / f"{split}.src"))
        ids = [f"doc{i // (1 + i % 9)}" for i in range(n)]
        (corpus / f"{split}.doc").write_text("".join(f"{d}\n" for d in ids))
    return corpus


def test_the_cache_keeps_each_pairs_document_and_document_joins_train(
    tiny_config, toy_dir, tmp_path
):
    corpus = with_documents(toy_dir, tmp_path)
    cfg = tiny_config(
        data={"dir": str(corpus), "join": {"prob": 0.5, "max_k": 3, "order": "document"}},
        train={"max_steps": 3},
    )
    _, data, _ = build(cfg, print)
    docs = read_lines(corpus / "train.doc")
    numbers = np.cumsum([0] + [docs[i] != docs[i - 1] for i in range(1, len(docs))])
    assert data.train.docs is not None
    assert (np.asarray(data.train.docs) == numbers[np.asarray(data.train.lines)]).all()
    assert isinstance(data.train.docs, np.memmap)  # read back from the cache entry
    assert train(cfg, device="cpu")["steps"] == 3


def test_document_joins_without_document_ids_are_refused(tiny_config):
    cfg = tiny_config(data={"join": {"prob": 0.5, "max_k": 3, "order": "document"}})
    with pytest.raises(NmtError, match=r"data\.join\.order: document joins within documents"):
        train(cfg, device="cpu")


def test_the_command_imports_real_documents_with_the_format_from_the_name(tmp_path):
    (tmp_path / "wiki.tsv").write_text("T\t文。\tText.\nT\t字。\tWord.\n")
    result = invoke("data", "import", tmp_path / "wiki.tsv", tmp_path / "out", "--src-lang", "zh",
                    "--tgt-lang", "en", "--columns", "doc,src,tgt")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert read_lines(tmp_path / "out/wiki.doc") == ["T", "T"]
    result = invoke("data", "import", tmp_path / "wiki.txt", tmp_path / "o2", "--src-lang", "zh",
                    "--tgt-lang", "en")  # fmt: skip
    assert result.exit_code == 2 and "give --format" in result.output
