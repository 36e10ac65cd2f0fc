"""Guided alignment (``train.alignment``): a loss that pulls one decoder layer's
cross-attention towards gold word alignments (Liu et al. 2016, "Neural Machine
Translation with Supervised Attention"; Garg et al. 2019, "Jointly Learning to
Align and Translate with Transformer Models").

Following Garg et al., the loss is the cross-entropy of the attention a_t (over
source pieces) against the normalised gold alignment g_t of each target position
t that has a link: −Σ_t Σ_s g_t(s) log a_t(s), here summed over the batch (the
trainer divides by the update's target tokens, as the token loss) and averaged
over the supervised heads, times ``weight``.

Every attention kind takes it:

- ``local_m`` / ``local_p`` give zero weight outside their window, where no
  gradient can move the attention: gold mass there is left out of the loss and
  reported as ``align_outside`` (the share of the gold mass outside the window);
- ``hard`` is supervised on α, the distribution its positions are sampled from
  (what it returns as weights), not on the one-hot sample;
- the standard decoder is supervised on its layer's one cross-attention call; the
  two-stream decoder on the query stream's (the stream that predicts, which each
  layer returns first; the content stream keeps no weights).
"""

from __future__ import annotations

import torch
from torch import Tensor

from nmt.attention.base import AttentionOutput
from nmt.setup.training import GuidedAlignment


def alignment_loss(
    attention: list[list[AttentionOutput]], gold: Tensor, cfg: GuidedAlignment
) -> tuple[Tensor, dict[str, float]]:
    """``attention``: per decoder layer the cross-attention calls (weights kept);
    gold (B,T,S) rows summing to 1 where a target position has a link. Returns the
    weighted loss (summed over the batch) and its statistics."""
    weights = attention[cfg.layer][0].weights  # (B,H,T,S) the predicting stream's
    assert weights is not None, "guided alignment needs the attention weights"
    a = weights[:, : cfg.heads].float()  # (B,h,T,S)
    g = gold.unsqueeze(1).to(a.dtype)  # (B,1,T,S)
    inside = a > 0
    ce = -(g * torch.log(a.clamp_min(1e-12)) * inside).sum() / cfg.heads
    mass = float(g.sum()) * cfg.heads
    outside = float((g * ~inside).sum()) / mass if mass else 0.0
    rows = max(float((gold.sum(-1) > 0).sum()), 1.0)
    return cfg.weight * ce, {"align_loss": float(ce.detach()) / rows, "align_outside": outside}
