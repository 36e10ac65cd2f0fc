"""nmt from Python (nmt/api.py): docs/api.md's example runs as written, and each call
gives what the matching command gives."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from nmt.api import Translator, score
from nmt.decoding.search import translate_lines
from nmt.errors import NmtError
from nmt.setup.decoding import Sampling
from tests.conftest import tiny_recipe_dict

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
def test_the_example_of_docs_api_md_runs_as_written(tiny_run, tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    code = next(b for b in blocks if "Translator.load" in b)  # the translation example
    monkeypatch.chdir(tmp_path)
    exec(compile(code.replace('"runs/toy"', repr(str(tiny_run))), str(DOC), "exec"), {})
    assert (tmp_path / "attention.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow  # 0.3 s of CPU or more (pyproject.toml, markers)
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
    # any iterable of references, one stream or several, as the hypotheses may be
    hyps = t.translate(src)
    assert score(hyps, iter(refs))["bleu"].score == score(hyps, refs)["bleu"].score
    assert score(hyps, (r for r in [refs, refs]))["bleu"].score == scores["bleu"].score


def test_bad_options_are_the_commands_errors(tiny_run):
    t = Translator.load(tiny_run, "cpu")
    # named by the recipe key, not by a --set that a Python call did not give
    with pytest.raises(NmtError, match=r"^decode\.coverage: must be in \[0, 100\]"):
        t.translate(["lo"], coverage=-1)
    with pytest.raises(NmtError, match=r"^decode\.nope: unknown key"):
        t.translate(["lo"], nope=1)
    with pytest.raises(NmtError, match="src: empty sentence"):
        t.attention("")
    with pytest.raises(NmtError, match="2 hypotheses but 1 references"):
        score(["a", "b"], ["a"])
    # an argument, not the command's --layer
    with pytest.raises(NmtError, match=r"^layer 3: the model has 1 decoder layer \(0\.\.0"):
        t.figure(t.attention("lo"), layer=3)


def test_one_string_where_strings_are_expected_is_refused(tiny_run):
    """Read as strings, a string is its characters: translate("lo nute") translated
    it letter by letter and returned a list of seven, and train(recipe,
    "train.max_steps=3") said "--set 't'"."""
    from nmt.api import compare, evaluate, train

    t = Translator.load(tiny_run, "cpu")
    calls = {
        "sentences": lambda: t.translate("lo nute"),
        "hyps": lambda: score("a", ["a"]),
        "refs": lambda: score(["a"], "a"),
        "metrics": lambda: score(["a"], ["a"], "bleu"),
        "overrides": lambda: train(tiny_run / "recipe.yaml", "train.max_steps=3"),
        "splits": lambda: evaluate(tiny_run, "test"),
        "spec": lambda: compare({"variants": {"global": []}}),
    }
    for name, call in calls.items():
        with pytest.raises(TypeError, match=f"^{name}: a "):
            call()
    with pytest.raises(TypeError, match=r"^sentences: item 1 is NoneType, not a string"):
        t.translate(["lo", None])
    with pytest.raises(TypeError, match=r"^sample: a Sampling"):
        t.translate(["lo"], sample=True)
    with pytest.raises(TypeError, match=r"^src: one string, not list"):
        t.attention(["lo", "nute"])
    with pytest.raises(TypeError, match=r"^amap: what attention"):
        t.figure("lo")


def test_absurd_sizes_are_refused_not_taken_for_the_default(tiny_run):
    """beam=0 once searched with the run's beam (read as "not given")."""
    from nmt.api import compare

    with pytest.raises(NmtError, match=r"^decode\.beam: must be in 1\.\.1024"):
        Translator.load(tiny_run, "cpu").translate(["lo"], beam=0)
    with pytest.raises(NmtError, match=r"^jobs: 0, expected"):
        compare(tiny_run / "spec.yaml", jobs=0)
    with pytest.raises(TypeError, match=r"^jobs: a number of runs at once, not str"):
        compare(tiny_run / "spec.yaml", jobs="2")


def test_keyword_options_are_taken_as_python_values(tiny_run):
    """A keyword's value is the value, not YAML text: split_lang=None (the key's
    default, "the source language") was read as the string 'None' and refused."""
    t = Translator.load(tiny_run, "cpu")
    assert t.translate(["lo nute"], split_lang=None) == t.translate(["lo nute"])
    with pytest.raises(NmtError, match=r"^decode\.max_len_b: expected an integer, got None"):
        t.translate(["lo"], max_len_b=None)


@pytest.mark.slow
def test_training_evaluation_and_a_study_from_python(toy_dir, tmp_path):
    """nmt.api.train, evaluate and compare do what the commands do and return what
    they write: the summary (with the test scores), results.json, the study's
    results.json."""
    from nmt.api import compare, evaluate, train
    from tests.compare.test_compare import write_spec

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(tiny_recipe_dict(toy_dir, tmp_path / "run")))
    summary = train(recipe, ["train.max_steps=4", "train.valid_every=2"], device="cpu")
    assert summary["steps"] == 4 and summary["stop"] == "train.max_steps"
    assert summary["results"]["test"]["sentences"] == 15
    assert json.loads((tmp_path / "run/summary.json").read_text())["steps"] == 4
    results = evaluate(tmp_path / "run", ["test*3"], overrides=["decode.beam=2"], device="cpu")
    assert {"test", "test*3@decode.beam=2"} <= results.keys()
    with pytest.raises(NmtError, match=r"train\.lrr: unknown key"):
        train(recipe, ["train.lrr=1"])
    spec = write_spec(
        tmp_path / "study",
        toy_dir,
        {"global": [], "local_m": ["model.attention.kind=local_m"]},
        seeds=(1,),
    )
    study = compare(spec, device="cpu")
    assert {(r["variant"], r["split"]) for r in study["rows"]} == {
        ("global", "test"),
        ("local_m", "test"),
    }
