"""The "ensemble of seeds" rows of a comparison (spec key ``ensemble: true``).

A variant trained with several seeds is also scored as one ensemble of them
(nmt.model.ensemble: the mean of their log-probabilities at each step), with the
recipe's decode settings on every split. An ensemble buys accuracy with decoding
time (one model's cost per member); the row says what it buys each variant, beside
the mean of its single seeds, so a reader can weigh a variant's gain against the
gain of simply ensembling the baseline.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from nmt.compare.analysis import RunAnalysis
from nmt.compare.rows import EnsembleRow
from nmt.data.pipeline import load_split
from nmt.decoding.evaluate import evaluated_model
from nmt.decoding.metrics import corpus_score
from nmt.decoding.split import translate_text
from nmt.decoding.translate import ensemble, one_line
from nmt.io.files import write_text
from nmt.progress import console

DIR = "ensembles"  # OUT/ensembles/VARIANT/{split}.hyp


def ensemble_rows(
    runs: dict[str, list[RunAnalysis]], splits: tuple[str, ...], out: Path, device: torch.device
) -> list[EnsembleRow]:
    """One row per (variant with at least two finished seeds, split): the ensemble's
    BLEU and chrF, the mean of its seeds', and the gain."""
    rows = []
    for name, per_seed in runs.items():
        if len(per_seed) < 2:
            continue
        console.print(f"ensemble of {name}'s {len(per_seed)} seeds")
        members = [evaluated_model(r.run_dir, device) for r in per_seed]
        model = ensemble(members, [r.run_dir for r in per_seed])
        cfg = members[0].cfg
        for split in splits:
            src, refs = load_split(cfg.data, split)
            nbest = translate_text(members[0], model, src, cfg.decode, device)
            hyps = [one_line(h[0].text) for h in nbest]
            write_text(out / DIR / name / f"{split}.hyp", "".join(h + "\n" for h in hyps))
            bleu, chrf = (corpus_score(m, hyps, [refs]).score for m in ("bleu", "chrf"))
            seeds_bleu = float(np.mean([r.splits[split].bleu for r in per_seed]))
            seeds_chrf = float(np.mean([r.splits[split].chrf for r in per_seed]))
            rows.append(EnsembleRow(name, split, len(per_seed), bleu, chrf, seeds_bleu, seeds_chrf))
    return rows
