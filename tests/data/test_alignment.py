"""Word alignments from attention and AER on hand-made alignments."""

from __future__ import annotations

import numpy as np
import pytest

from nmt.data.alignment import aer, attention_alignment, group, parse_pharaoh, word_ids
from nmt.errors import NmtError


def test_word_ids_follow_the_word_marker():
    assert word_ids(["▁a", "b", "▁c", "▁", "d"]) == [0, 0, 1, 2, 2]


def test_grouped_rows_stay_distributions():
    rng = np.random.default_rng(0)
    w = rng.random((5, 4))
    w /= w.sum(1, keepdims=True)
    words = group(w, [0, 0, 1, 2], [0, 1, 1, 2, 2])
    assert words.shape == (3, 3)
    np.testing.assert_allclose(words.sum(1), 1.0)
    np.testing.assert_allclose(words[0], [w[0, :2].sum(), w[0, 2], w[0, 3]])


def test_attention_alignment_takes_each_target_words_argmax():
    # source words: "▁x y" (0), "▁z" (1); target words: "▁p" (0), "▁q r" (1)
    w = np.array(
        [
            [0.1, 0.1, 0.8],  # ▁p -> z
            [0.4, 0.4, 0.2],  # ▁q -> x y (0.8 summed)
            [0.3, 0.3, 0.4],  # r  -> x y (0.6 summed)
        ]
    )
    assert attention_alignment(w, ["▁x", "y", "▁z"], ["▁p", "▁q", "r"]) == {(1, 0), (0, 1)}


def test_aer_on_hand_made_alignments():
    gold = [parse_pharaoh("0-0 1-1 2-2", "g"), parse_pharaoh("0-1 1-0", "g")]
    assert aer(gold, gold) == 0.0
    assert aer([{(0, 2)}, {(1, 1)}], gold) == 1.0
    # 3 of 4 predicted links are gold; 5 gold links: 1 - 2*3/(4+5)
    predicted = [{(0, 0), (1, 1), (2, 1)}, {(0, 1)}]
    assert aer(predicted, gold) == pytest.approx(1 - 6 / 9)


@pytest.mark.parametrize(
    "pair", ["1:2", "1-x", "x-1", "-1", "1-", "1-2-3", "1--2", "1-²", "١-2", "1-٣"]
)
def test_malformed_pharaoh_names_the_place(pair):
    with pytest.raises(NmtError, match=rf"test\.align:3: '{pair}' is not an i-j alignment pair"):
        parse_pharaoh(f"0-0 {pair}", "test.align:3")


@pytest.mark.parametrize("pair", ["0-99999999999999999999999", "1" * 5000 + "-0"])
def test_a_word_index_past_any_sentence_names_the_place(pair):
    """Used to raise OverflowError (past int64) or Python's digit-limit ValueError."""
    with pytest.raises(NmtError, match=r"test\.align:3: .* a word index of more than 9 digits"):
        parse_pharaoh(f"0-0 {pair}", "test.align:3")
