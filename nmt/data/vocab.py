"""SentencePiece vocabularies (Kudo & Richardson 2018), trained or loaded."""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

from nmt.errors import NmtError

UNK, PAD, BOS, EOS = 0, 1, 2, 3  # fixed ids in every vocabulary this toolkit trains
SEPARATOR_PIECE = "<sep>"  # how a separator (see Vocab) is shown among pieces
CHARS_PER_PIECE = 1024  # characters kept per wanted piece before encoding (see cut)


def clip_lines(lines: list[str], limit: int) -> list[str]:
    """Each line cut to CHARS_PER_PIECE × (``limit`` + 1) characters before encoding:
    far more than ``limit`` + 1 pieces span in any real text, so a line's first
    pieces, and whether it has more than ``limit``, stay the same, while a line of
    hundreds of megabytes costs what a long one does (SentencePiece would build a
    list of its every piece, and can abort the process)."""
    n = CHARS_PER_PIECE * (limit + 1)
    return [line[:n] for line in lines]


class Vocab:
    """A SentencePiece model held as bytes, so a checkpoint carries it whole.

    ``separator``: the vocabulary has one id more than the model, the last, which
    divides the sentences of a multi-sentence input (a sentence-group model's,
    ``model.decoder.group_layers``). SentencePiece never produces it; joined
    examples and marked inputs put it between sentences, and text decoded from ids
    leaves it out (each piece carries its own word boundary, so the sentences join
    as the language writes them: with a space in English, none in Chinese)."""

    def __init__(self, model: bytes, name: str = "vocabulary", separator: bool = False) -> None:
        self.model, self.name = model, name
        self.sp = spm.SentencePieceProcessor()
        try:
            if not isinstance(model, bytes):
                raise TypeError
            self.sp.LoadFromSerializedProto(model)
        except (RuntimeError, OSError, TypeError):
            # SentencePiece's own message names only its C++ source line.
            raise NmtError(
                f"{name}: not a SentencePiece model (damaged, or another kind of file)"
            ) from None
        if (self.sp.pad_id(), self.sp.bos_id(), self.sp.eos_id()) != (PAD, BOS, EOS):
            raise NmtError(
                f"{name}: SentencePiece model must use pad_id={PAD}, "
                f"bos_id={BOS}, eos_id={EOS} (unk_id={UNK})"
            )
        self.separator = self.sp.get_piece_size() if separator else None

    def separated(self) -> Vocab:
        """This vocabulary with a separator (see the class docstring)."""
        return self if self.separator is not None else Vocab(self.model, self.name, True)

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        path = Path(path)
        if not path.is_file():
            raise NmtError(f"{path}: no such SentencePiece model file")
        return cls(path.read_bytes(), str(path))

    @classmethod
    def train(
        cls, sentences: Iterable[str], size: int, model_type: str, sample: int = 2_000_000
    ) -> Vocab:
        """Train on ``sentences``, or on ``sample`` of them drawn at random (with a fixed
        seed, so that every run on the same corpus gets the same vocabulary) when
        there are more; ``size`` is a soft limit so small corpora still work."""
        spm.set_random_generator_seed(1)
        out = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=out,
            vocab_size=size,
            model_type=model_type,
            character_coverage=1.0,
            hard_vocab_limit=False,
            unk_id=UNK,
            pad_id=PAD,
            bos_id=BOS,
            eos_id=EOS,
            minloglevel=2,
            input_sentence_size=sample,
            shuffle_input_sentence=True,
            num_threads=2,
        )
        return cls(out.getvalue())

    def __len__(self) -> int:
        return self.sp.get_piece_size() + (self.separator is not None)

    def encode(self, lines: list[str]) -> list[list[int]]:
        return self.sp.encode(lines)

    def pieces(self, line: str) -> list[str]:
        return self.sp.encode(line, out_type=str)

    def encode_sentences(self, lines: list[list[str]]) -> list[list[int]]:
        """Each line's sentences encoded one after another, the separator between them."""
        if self.separator is None:
            raise ValueError("a vocabulary without a separator encodes lines, not sentences")
        encoded = self.encode([s for sentences in lines for s in sentences])
        out, k = [], 0
        for sentences in lines:
            ids: list[int] = []
            for i, piece_ids in enumerate(encoded[k : k + len(sentences)]):
                ids += [self.separator] * (i > 0) + piece_ids
            out.append(ids)
            k += len(sentences)
        return out

    def decode(self, ids: list[list[int]]) -> list[str]:
        if self.separator is not None:
            ids = [[i for i in line if i != self.separator] for line in ids]
        return self.sp.decode(ids)

    def id_to_piece(self, i: int) -> str:
        return SEPARATOR_PIECE if i == self.separator else self.sp.id_to_piece(i)
