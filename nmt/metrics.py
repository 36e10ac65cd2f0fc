"""sacreBLEU wrappers (Post 2018): corpus scores with their signatures."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sacrebleu.metrics import BLEU, CHRF, TER

from nmt.data.corpus import read_lines
from nmt.errors import NmtError

METRICS = {"bleu": BLEU, "chrf": CHRF, "ter": TER}


@dataclass(frozen=True)
class Score:
    name: str
    score: float
    text: str  # sacreBLEU's own rendering, e.g. "BLEU = 34.70 65.1/40.2/..."
    signature: str


def corpus_score(metric: str, hyps: list[str], refs: list[list[str]]) -> Score:
    """Score ``hyps`` against one or more reference streams with sacreBLEU defaults
    (BLEU: cased, 13a tokenisation, exp smoothing)."""
    m = METRICS[metric]()
    result = m.corpus_score(hyps, refs)
    return Score(metric, float(result.score), str(result), str(m.get_signature()))


def bleu(hyps: list[str], refs: list[str]) -> float:
    return corpus_score("bleu", hyps, [refs]).score


def score_files(hyp_path: Path, ref_paths: list[Path], metrics: list[str]) -> list[Score]:
    """Score a hypothesis file against reference files; counts must match and be non-zero."""
    unknown = [m for m in metrics if m not in METRICS]
    if unknown or not metrics:
        raise NmtError(
            f"--metrics: unknown {', '.join(unknown) or '(none given)'}; "
            f"valid: {', '.join(METRICS)}"
        )
    hyps = read_lines(hyp_path)
    if not hyps:
        raise NmtError(f"{hyp_path}: empty file, nothing to score")
    refs = []
    for path in ref_paths:
        lines = read_lines(path)
        if len(lines) != len(hyps):
            raise NmtError(f"{hyp_path} has {len(hyps)} lines but {path} has {len(lines)}")
        refs.append(lines)
    return [corpus_score(m, hyps, refs) for m in metrics]
