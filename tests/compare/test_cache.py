"""nmt.compare.cache: a run's attention figures are used again only when everything
they were computed from is the same, come back as they were computed, and a damaged
or foreign file is computed again, never trusted or executed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nmt.compare.cache import OUTPUTS, REFERENCES, FigureCache, npz_bytes
from nmt.inspection.maps import AttentionMap

RNG = np.random.default_rng(0)
MAPS = {
    0: AttentionMap(["▁a", "b", "</s>"], ["▁x", "</s>"], RNG.random((2, 4, 2, 3)), None),
    3: AttentionMap(
        ["猫", "</s>"], ["▁cat", "</s>"], RNG.random((2, 4, 2, 2)), RNG.random((2, 1, 2))
    ),
}
REFS = ({"entropy": 1.25, "peak_distance": 0.5, "aer": 0.1}, MAPS)
OUTS = ({"dropped": RNG.random((5, 2)), "backward": RNG.random((5, 2))}, RNG.random((5, 3, 2)))


def computing(value):
    calls = []

    def compute():
        calls.append(1)
        return value

    return compute, calls


def same_references(a, b) -> bool:
    (fa, ma), (fb, mb) = a, b
    return (
        fa == fb
        and ma.keys() == mb.keys()
        and all(
            ma[i].src == mb[i].src
            and ma[i].tgt == mb[i].tgt
            and np.array_equal(ma[i].weights, mb[i].weights)
            and (ma[i].centers is None) == (mb[i].centers is None)
            and (ma[i].centers is None or np.array_equal(ma[i].centers, mb[i].centers))
            for i in ma
        )
    )


def test_figures_come_back_as_computed_and_are_computed_once(tmp_path):
    cache = FigureCache(tmp_path / "analysis", "origin")
    compute, calls = computing(REFS)
    first = cache.computed("test.refs", cache.key("lines"), compute, REFERENCES)
    again = cache.computed("test.refs", cache.key("lines"), compute, REFERENCES)
    assert len(calls) == 1 and same_references(first, REFS) and same_references(again, REFS)
    compute, calls = computing(OUTS)
    cache.computed("test~2.hyps", cache.key("out"), compute, OUTPUTS)
    sentences, captions = cache.computed("test~2.hyps", cache.key("out"), compute, OUTPUTS)
    assert len(calls) == 1 and np.array_equal(captions, OUTS[1])
    assert all(np.array_equal(sentences[k], v) for k, v in OUTS[0].items())
    compute, _ = computing(({"dropped": np.zeros((1, 2))}, None))
    assert cache.computed("x.hyps", cache.key(), compute, OUTPUTS)[1] is None


@pytest.mark.parametrize("change", ["origin", "read", "name"])
def test_anything_else_computes_again(tmp_path, change):
    cache = FigureCache(tmp_path / "analysis", "origin")
    compute, calls = computing(REFS)
    cache.computed("test.refs", cache.key(["a line"], {(0, 1)}), compute, REFERENCES)
    other = (
        FigureCache(tmp_path / "analysis", "another checkpoint") if change == "origin" else cache
    )
    read = (["a line"], {(0, 2)}) if change == "read" else (["a line"], {(0, 1)})
    name = "test~2.refs" if change == "name" else "test.refs"
    other.computed(name, other.key(*read), compute, REFERENCES)
    assert len(calls) == 2


def test_the_origin_names_the_checkpoints_bytes_the_device_and_the_models_code(tmp_path):
    model = torch.nn.Linear(2, 2)
    ckpt = tmp_path / "best.pt"
    ckpt.write_bytes(b"weights")
    cpu = FigureCache.of(tmp_path, ckpt, model, torch.device("cpu"))
    assert cpu == FigureCache.of(tmp_path, ckpt, model, torch.device("cpu"))
    assert cpu != FigureCache.of(tmp_path, ckpt, model, torch.device("meta"))
    assert cpu != FigureCache.of(
        tmp_path, ckpt, torch.nn.Sequential(model, torch.nn.ReLU()), torch.device("cpu")
    )
    ckpt.write_bytes(b"other weights")
    assert cpu != FigureCache.of(tmp_path, ckpt, model, torch.device("cpu"))


@pytest.mark.parametrize(
    "damage",
    [b"not a zip", b"", npz_bytes({"__key__": np.array(["k"], dtype=object)})],
    ids=["garbage", "empty", "pickled"],
)
def test_a_damaged_or_pickled_file_is_said_and_computed_again(tmp_path, capsys, damage):
    cache = FigureCache(tmp_path / "analysis", "origin")
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "test.refs.npz").write_bytes(damage)
    compute, calls = computing(REFS)
    assert same_references(cache.computed("test.refs", "k", compute, REFERENCES), REFS)
    assert len(calls) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "test.refs.npz: damaged" in err[0] and "computed again" in err[0]
    cache.computed("test.refs", "k", compute, REFERENCES)  # replaced: read, not computed
    assert len(calls) == 1
