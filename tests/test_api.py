"""nmt from Python (nmt/api.py): docs/api.md's example runs as written, and each call
gives what the matching command gives."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from nmt.api import Translator, score
from nmt.decoding.search import translate_lines
from nmt.errors import NmtError
from nmt.setup.decoding import Sampling

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def test_the_example_of_docs_api_md_runs_as_written(tiny_run, tmp_path, monkeypatch):
    code = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code.replace('"runs/toy"', repr(str(tiny_run))), str(DOC), "exec"), {})
    assert (tmp_path / "attention.png").read_bytes()[:4] == b"\x89PNG"


def test_the_calls_give_what_the_commands_give(tiny_run, toy_dir):
    t = Translator.load(tiny_run, "cpu")
    src = (toy_dir / "test.src").read_text().splitlines()[:5]
    refs = (toy_dir / "test.tgt").read_text().splitlines()[:5]
    v = t.loaded.vocabs
    want = translate_lines(t.loaded.model, v.src, v.tgt, src, t.loaded.cfg.decode, t.device)
    assert t.translate(src) == [h[0].text for h in want]
    nbest = t.nbest(src, beam=3, n_best=3)
    assert all(
        len(h) <= 3 and [x.score for x in h] == sorted([x.score for x in h], reverse=True)
        for h in nbest
    )
    drawn = t.translate(src, sample=Sampling(seed=4))
    assert drawn == t.translate(src, sample=Sampling(seed=4))  # seeded: the same draws
    oracle = t.nbest(src, refs=refs)
    assert [len(h[0].tokens) for h in oracle] == [len(x) for x in v.tgt.encode(refs)]
    amap = t.attention(src[0])
    assert amap.weights.shape[:2] == (1, 2) and amap.src[-1] == "</s>"
    np.testing.assert_allclose(amap.weights.sum(-1), 1.0, rtol=1e-5)
    forced = t.attention(src[0], tgt=refs[0])
    assert forced.tgt[:-1] == [v.tgt.id_to_piece(i) for i in v.tgt.encode([refs[0]])[0]]
    scores = score(t.translate(src), refs, ["bleu", "chrf++", "ter"])
    assert set(scores) == {"bleu", "chrf++", "ter"} and "chrF2++" in scores["chrf++"].text


def test_bad_options_are_the_commands_errors(tiny_run):
    t = Translator.load(tiny_run, "cpu")
    with pytest.raises(NmtError, match=r"decode\.coverage: must be in \[0, 100\]"):
        t.translate(["lo"], coverage=-1)
    with pytest.raises(NmtError, match=r"decode\.nope: unknown key"):
        t.translate(["lo"], nope=1)
    with pytest.raises(NmtError, match="src: empty sentence"):
        t.attention("")
    with pytest.raises(NmtError, match="2 hypotheses but 1 references"):
        score(["a", "b"], ["a"])
