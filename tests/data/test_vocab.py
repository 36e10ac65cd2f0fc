"""A vocabulary with a sentence separator (a sentence-group model's): one id more than
its SentencePiece model, between the sentences of a line, and never in text."""

from __future__ import annotations

import pytest

from nmt.data.vocab import SEPARATOR_PIECE, Vocab

TEXT = ["the dog runs in the park.", "two men sit on a green bench.", "a girl reads."] * 20


@pytest.fixture(scope="module")
def vocab() -> Vocab:
    return Vocab.train(TEXT, 60, "unigram")


def test_the_separator_is_one_id_past_the_model_and_is_shown_as_a_piece(vocab):
    marked = vocab.separated()
    assert marked.separator == len(vocab) and len(marked) == len(vocab) + 1
    assert vocab.separator is None and marked.separated() is marked
    assert marked.id_to_piece(marked.separator) == SEPARATOR_PIECE
    assert marked.id_to_piece(5) == vocab.id_to_piece(5)


def test_sentences_are_encoded_with_the_separator_between_and_decoded_without(vocab):
    marked = vocab.separated()
    lines = [["the dog runs.", "a girl reads."], ["two men sit."], []]
    ids = marked.encode_sentences(lines)
    first, second = vocab.encode(["the dog runs.", "a girl reads."])
    assert ids == [[*first, marked.separator, *second], vocab.encode(["two men sit."])[0], []]
    assert marked.decode(ids) == ["the dog runs. a girl reads.", "two men sit.", ""]
    with pytest.raises(ValueError, match="separator"):
        vocab.encode_sentences(lines)
