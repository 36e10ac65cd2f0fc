"""A spec's own overrides on the command line."""

from __future__ import annotations

import pytest

from nmt.errors import NmtError


def test_a_recipe_key_on_the_command_line_points_to_the_specs_set(tmp_path):
    """``nmt compare SPEC --set train.lr=...`` names the way: ``set+=`` appends a recipe
    override to the spec's set list, which every variant takes."""
    from nmt.setup.compare import with_spec_overrides

    raw = {"set": ["train.max_steps=4"], "seeds": [1]}
    with pytest.raises(
        NmtError,
        match=r"--set train\.lr=1e-3: a recipe key, not a spec key.*"
        r"--set 'set\+=train\.lr=1e-3'",
    ):
        with_spec_overrides(raw, ["train.lr=1e-3"])
    out = with_spec_overrides(raw, ["set+=train.lr=1e-3", "seeds=[1,2]"])
    assert out["set"] == ["train.max_steps=4", "train.lr=1e-3"] and out["seeds"] == [1, 2]
    assert raw["set"] == ["train.max_steps=4"]  # the spec read is left as it was
