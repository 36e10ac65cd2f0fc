"""Translate with an ``nmt export --format onnx`` directory, by onnxruntime alone.

This file is copied into every ONNX export as ``translate.py``: it imports numpy,
onnxruntime and sentencepiece, never nmt or torch, so that an export runs wherever
those three install. It is nmt's search (nmt.decoding.search) written again over
numpy arrays: greedy search and batched beam search, the same length limits, GNMT's
length penalty, the least length and the word reward, so that its outputs are
``nmt translate``'s (tests/export/test_onnx.py compares them line by line).

The export holds two graphs. ``start.onnx`` reads source ids (B,S) and returns the
log-probabilities of the first target piece (B,V) and the decoder's state: every
tensor the next step reads (each layer's projected encoder keys and values, the
source mask and lengths, and the caches of the steps decoded so far).
``step.onnx`` reads the last piece of each row (N,1) and the state, and returns
the next log-probabilities and the state's new caches. Every state tensor has its
batch rows first, so that search reorders a beam by indexing them all alike.

Usage: ``python translate.py EXPORT_DIR [--beam K] < source.txt > output.txt``
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnxruntime as ort
import sentencepiece as spm

UNK, PAD, BOS, EOS = 0, 1, 2, 3  # fixed ids in every vocabulary nmt trains
NEG_INF = np.float32(-np.inf)
CHARS_PER_PIECE = 1024  # characters kept per wanted piece before encoding (as nmt)


@dataclass(frozen=True)
class Search:
    """The search settings of the exported run's ``decode`` section that this loop
    applies (an export that needs others is refused when it is written)."""

    beam: int = 5
    alpha: float = 1.0  # length penalty ((5 + len) / 6) ** alpha, Wu et al. 2016
    max_len_a: float = 1.5  # at most a·S + b pieces, EOS included, S with EOS
    max_len_b: int = 10
    min_len_a: float = 0.0  # no EOS before a·S + b pieces
    min_len_b: int = 0
    word_reward: float = 0.0  # γ per piece (beam search only)
    batch_tokens: int = 8192  # source tokens (times the beam) per batch


@dataclass
class Batch:
    """Sentences in flight: each one's index in the input, its bounds, and the
    decoder state rows (one per sentence, or per beam row)."""

    index: np.ndarray  # (n,) position in the input
    limit: np.ndarray  # (n·K,) the step at which EOS is forced
    least: np.ndarray  # (n·K,) pieces before EOS may end an output
    state: dict[str, np.ndarray]

    def select(self, rows: np.ndarray, same_source: bool = False) -> None:
        """Keep state rows ``rows`` (beam reordering, finished sentences).
        ``same_source``: each kept row reads the source of the row it replaces (a
        beam reordered within its sentence), so the encoder memory is kept as it is."""
        self.state = {
            name: value if same_source and name.startswith("memory.") else value[rows]
            for name, value in self.state.items()
        }
        self.limit, self.least = self.limit[rows], self.least[rows]


class Translator:
    """An ONNX export loaded for translation: ``translate(lines)``."""

    def __init__(self, directory: str | Path, threads: int = 0) -> None:
        directory = Path(directory)
        self.manifest = json.loads((directory / "nmt-export.json").read_text())
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads  # 0: onnxruntime's choice
        options.inter_op_num_threads = 1
        self.start = ort.InferenceSession(str(directory / "start.onnx"), options)
        self.step = ort.InferenceSession(str(directory / "step.onnx"), options)
        self.state_names = self.manifest["state"]  # what start returns after logp
        self.carried = self.manifest["carried"]  # what step returns after logp
        self.source = spm.SentencePieceProcessor(model_file=str(directory / "source.spm"))
        self.target = spm.SentencePieceProcessor(model_file=str(directory / "target.spm"))
        self.cap = self.manifest["max_positions"] - 1
        self.search = Search(**self.manifest["search"])
        self.truncated = 0  # input lines the last translate call cut to the model's length

    def translate(self, lines: list[str], **settings: float) -> list[str]:
        """One output line per input line; ``settings`` override the export's search
        (``beam=1``: greedy). An empty line gets an empty output; a line longer than
        the model's positions is cut to them, as nmt translate cuts it, and
        ``self.truncated`` counts such lines."""
        if isinstance(lines, str):  # read as lines, a string is its characters
            raise TypeError(f"lines: a list of lines, not one string (write [{lines[:40]!r}])")
        search = replace(self.search, **settings)
        clipped = [line[: CHARS_PER_PIECE * (self.cap + 1)] for line in lines]
        encoded = self.source.encode(clipped)
        self.truncated = sum(len(s) > self.cap for s in encoded)
        ids = [s[: self.cap] for s in encoded]
        outputs: list[list[int]] = [[] for _ in lines]
        for index in batches(ids, max(1, search.batch_tokens // search.beam)):
            src = padded([ids[i] + [EOS] for i in index])
            for i, tokens in zip(index, self.decode(src, search)):
                outputs[i] = tokens
        return self.target.decode(outputs)

    def decode(self, src: np.ndarray, search: Search) -> list[list[int]]:
        """Target ids of each source row (B,S), by greedy or beam search."""
        logp, *state = self.start.run(None, {"src": src})
        sizes = (src != PAD).sum(1).astype(np.float32)  # (B,) with EOS
        limit = np.clip((search.max_len_a * sizes + search.max_len_b).astype(np.int64), 1, self.cap)
        least = (search.min_len_a * sizes + search.min_len_b).astype(np.int64)
        batch = Batch(np.arange(len(src)), limit, least, dict(zip(self.state_names, state)))
        if search.beam == 1:
            return self.greedy(batch, logp)
        return self.beam(batch, logp, search)

    def next_logp(self, batch: Batch, last: np.ndarray) -> np.ndarray:
        """The log-probabilities (N,V) after the last pieces (N,); the state's caches
        advance."""
        inputs = {"last": last[:, None], **batch.state}
        logp, *carried = self.step.run(None, inputs)
        batch.state.update(zip(self.carried, carried))
        return logp

    def greedy(self, batch: Batch, logp: np.ndarray) -> list[list[int]]:
        """The most probable piece at each step; a sentence leaves when it ends."""
        results: list[list[int]] = [[] for _ in batch.index]
        tokens = np.zeros((len(batch.index), 0), dtype=np.int64)
        for t in range(int(batch.limit.max())):
            if t:
                logp = self.next_logp(batch, tokens[:, -1])
            logp = restricted(logp, None, t + 1 >= batch.limit, t < batch.least)
            tokens = np.concatenate([tokens, logp.argmax(-1)[:, None]], axis=1)
            done = tokens[:, -1] == EOS
            for b, row in zip(batch.index[done], tokens[done]):
                results[b] = stripped(row)
            if done.all():
                return results
            kept = np.flatnonzero(~done)
            batch.index, tokens = batch.index[kept], tokens[kept]
            batch.select(kept)
        raise AssertionError("unreachable: every sentence ends by its limit")

    def beam(self, batch: Batch, logp: np.ndarray, search: Search) -> list[list[int]]:
        """Batched beam search as nmt's: a finished hypothesis stays in its beam at no
        cost until every one of its sentence's K has ended."""
        K, B = search.beam, len(batch.index)
        results: list[list[int]] = [[] for _ in batch.index]
        batch.select(np.repeat(np.arange(B), K))
        logp = logp[np.repeat(np.arange(B), K)]
        scores = np.zeros((B, K), dtype=np.float32)
        scores[:, 1:] = NEG_INF  # all beams start alike: expand only the first
        finished = np.zeros(B * K, dtype=bool)
        length = np.zeros(B * K, dtype=np.float32)
        tokens = np.zeros((B * K, 0), dtype=np.int64)
        for t in range(int(batch.limit.max())):
            n = len(batch.index)
            if t:
                logp = self.next_logp(batch, tokens[:, -1])
            at_limit = t + 1 >= batch.limit
            logp = restricted(logp, finished, at_limit, t < batch.least)
            cand = scores.reshape(-1, 1) + logp  # (n·K,V)
            cand_len = np.where(finished, length, np.float32(t + 1))
            extra = search.word_reward * cand_len  # (n·K,)
            ranked = cand / penalty(cand_len, search.alpha)[:, None] + extra[:, None]
            top = top_k(ranked.reshape(n, -1), K)  # (n,K) best first
            V = ranked.shape[1]
            pick = (np.arange(n)[:, None] * K + top // V).reshape(-1)
            token = (top % V).reshape(-1)
            scores = np.take_along_axis(cand.reshape(n, -1), top, axis=1)
            length = cand_len[pick]
            tokens = np.concatenate([tokens[pick], token[:, None]], axis=1)
            finished = finished[pick] | (token == EOS) | at_limit[pick]
            batch.select(pick, same_source=True)  # pick stays within each sentence
            done = finished.reshape(n, K).all(1)  # (n,)
            if not done.any():
                continue
            out = np.repeat(done, K)
            final = scores[done].reshape(-1) / penalty(length[out], search.alpha)
            final = (final + search.word_reward * length[out]).reshape(-1, K)
            best = final.argmax(1)
            for j, b in enumerate(batch.index[done]):
                results[b] = stripped(tokens[out].reshape(-1, K, tokens.shape[1])[j, best[j]])
            if done.all():
                return results
            kept = np.flatnonzero(~out)
            batch.index, scores = batch.index[~done], scores[~done]
            tokens, finished, length = tokens[kept], finished[kept], length[kept]
            batch.select(kept)
        raise AssertionError("unreachable: every row ends at its limit")


def restricted(
    logp: np.ndarray, finished: np.ndarray | None, at_limit: np.ndarray, too_short: np.ndarray
) -> np.ndarray:
    """nmt's rules for the next piece (nmt.decoding.search._restrict): never PAD or
    BOS; a finished row continues with PAD at no cost; a row under its least length
    may not end; a row at its limit must end (the limit wins)."""
    logp = logp.copy()
    logp[:, [PAD, BOS]] = NEG_INF
    force = at_limit
    if finished is not None:
        logp[finished] = NEG_INF
        logp[finished, PAD] = 0.0
        force = at_limit & ~finished
    eos = logp[force, EOS]
    logp[too_short & ~at_limit, EOS] = NEG_INF
    logp[force] = NEG_INF
    logp[force, EOS] = eos
    return logp


def penalty(length: np.ndarray, alpha: float) -> np.ndarray:
    """GNMT's length penalty ((5 + |Y|) / 6) ** alpha (Wu et al. 2016, eq. 14)."""
    return ((np.float32(5.0) + length) / np.float32(6.0)) ** np.float32(alpha)


def top_k(x: np.ndarray, k: int) -> np.ndarray:
    """The columns of each row's k largest values (n,k), largest first."""
    part = np.argpartition(-x, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(x, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


def stripped(row: np.ndarray) -> list[int]:
    """An output's pieces before its EOS (padding left out)."""
    row = row.tolist()
    return row[: row.index(EOS)] if EOS in row else [t for t in row if t != PAD]


def batches(ids: list[list[int]], tokens: int) -> Iterator[list[int]]:
    """Indices of non-empty sentences, by length, in batches of at most ``tokens``
    source tokens (padding counted)."""
    order = sorted((i for i, s in enumerate(ids) if s), key=lambda i: len(ids[i]))
    batch: list[int] = []
    for i in order:
        if batch and (len(batch) + 1) * (len(ids[i]) + 1) > tokens:
            yield batch
            batch = []
        batch.append(i)
    if batch:
        yield batch


def padded(rows: list[list[int]]) -> np.ndarray:
    """Rows of ids padded with PAD to one length: (B,S) int64."""
    out = np.full((len(rows), max(map(len, rows))), PAD, dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def read_lines(data: bytes) -> list[str]:
    """UTF-8 text as its lines, split at newlines as nmt reads files (a final newline
    ends the last line and adds none; a line's carriage return is dropped)."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    out = []
    for number, line in enumerate(lines, 1):
        try:
            out.append(line.decode("utf-8").removesuffix("\r"))
        except UnicodeDecodeError:
            raise ValueError(f"line {number} is not UTF-8 text") from None
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("export", type=Path, help="the directory nmt export wrote")
    parser.add_argument("--beam", type=int, help="beam size (1: greedy); default: the run's")
    parser.add_argument("--threads", type=int, default=0, help="onnxruntime's (0: its choice)")
    args = parser.parse_args(argv)
    if args.beam is not None and args.beam < 1:
        parser.error(f"--beam {args.beam}: at least 1")
    try:
        translator = Translator(args.export, args.threads)
    except Exception as e:  # onnxruntime's and SentencePiece's errors have no common base
        why = " ".join(str(e).split())[:200]
        print(f"translate.py: {args.export}: not an nmt ONNX export ({why})", file=sys.stderr)
        return 2
    try:
        lines = read_lines(sys.stdin.buffer.read())
    except ValueError as e:
        print(f"translate.py: standard input: {e}", file=sys.stderr)
        return 2
    settings = {} if args.beam is None else {"beam": args.beam}
    sys.stdout.write("".join(f"{line}\n" for line in translator.translate(lines, **settings)))
    if translator.truncated:
        print(
            f"translate.py: {translator.truncated} input line(s) longer than "
            f"{translator.cap} pieces were truncated",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
