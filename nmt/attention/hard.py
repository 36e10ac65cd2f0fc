"""Hard (stochastic) attention: Xu et al. 2015 (sec. 4.1), Deng et al. 2018.

The attention distribution α_t over real source positions is a categorical.
Training picks one position per (batch, head, query) and the context is that
position's value. Sampling has no gradient, so the scores are trained by an
estimator (``estimator``):

- ``reinforce``: the score-function estimator (Williams 1992; Xu et al. 2015,
  eq. 12): loss −A_t·log α_t(ŝ_t) − λ_e·H(α_t). The decoder is causal, so the
  choice made for target position t can only change the likelihood of tokens
  t, t+1, ...; its advantage is therefore the reward to go,
  A_t = Σ_{t' ≥ t} (r_t' − b), with b a moving-average baseline per token.
  A baseline must not depend on the sample it centres, or the estimate is
  biased: the first update, which has no average yet, gives each sentence the
  mean reward of the batch's other sentences (a leave-one-out baseline).
  The reward r_t is minus token t's training loss, the label-smoothed
  cross-entropy, so that this term and the pathwise gradient of the same loss
  are together the gradient of one objective, the expected training loss.
  Dropping the earlier tokens' rewards keeps the estimator unbiased and removes
  their noise (the "causality" form of the policy gradient).
  With ``expected_prob`` p, each context is the expected (soft) context with
  probability p instead of a sample (Xu et al.'s variance trick).
- ``straight_through``: one-hot sample forward, softmax gradient backward
  (Bengio et al. 2013).
- ``gumbel``: Gumbel-softmax relaxation (Jang et al. 2017) whose temperature
  anneals from ``tau`` to ``tau_min`` as exp(−``anneal``·update).

Inference is deterministic: the argmax position.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from nmt.attention.base import (
    AttentionOutput,
    Context,
    CrossAttention,
    LossTerm,
    Memory,
    masked_softmax,
)
from nmt.setup.attention import HardConfig


def leave_one_out(reward: Tensor, mask: Tensor) -> Tensor:
    """Per sentence (B,) the mean per-token reward of the batch's other sentences
    (0 for a batch of one); reward and mask (B,T)."""
    sums, counts = (reward * mask).sum(1), mask.sum(1)  # (B,)
    others = (counts.sum() - counts).clamp(min=1)  # (B,)
    return (sums.sum() - sums) / others


class HardAttention(CrossAttention):
    """See the module docstring. Weights returned for inspection are α (the
    distribution the samples come from)."""

    def __init__(self, cfg: HardConfig, d_model: int, heads: int, dropout: float) -> None:
        super().__init__(cfg, d_model, heads, dropout)
        self.register_buffer("baseline", torch.zeros(()))  # per-token reward average

    def temperature(self, update: int) -> float:
        """Gumbel's τ at optimiser ``update``: it follows the update, not the forward
        call (scheduled sampling's passes, accumulated micro-batches and the
        two-stream decoder's second call each run a forward within one update)."""
        c = self.cfg
        decayed = torch.exp(-c.anneal * torch.tensor(update, dtype=torch.float32))
        return max(c.tau_min, c.tau * float(decayed))

    def forward(self, query: Tensor, memory: Memory, ctx: Context) -> AttentionOutput:
        q = self.queries(query)  # (B,H,T,Dh)
        mask = memory.mask.unsqueeze(1)  # (B,1,1,S), a group layer's (B,1,T,S)
        scores = self.scores(q, memory, ctx).masked_fill(~mask, torch.finfo(q.dtype).min)
        alpha = masked_softmax(scores, mask)  # (B,H,T,S)
        has_key = mask.any(-1, keepdim=True)  # (B,1,1,1)
        log_prob = entropy = None
        # 1) choose positions: weights (B,H,T,S), one-hot (or relaxed) per query
        if not self.training:
            # a one-hot row as a scatter, not F.one_hot, whose class count an ONNX
            # export would fix at the traced source length (the values are the same)
            best = scores.argmax(-1, keepdim=True)  # (B,H,T,1)
            weights = torch.zeros_like(scores).scatter(-1, best, 1.0) * has_key
        elif self.cfg.estimator == "gumbel":
            # A row without a real key gets finite scores: finfo.min / τ is −inf for τ < 1.
            finite = scores.masked_fill(~has_key, 0.0)
            weights = F.gumbel_softmax(finite, tau=self.temperature(ctx.update), dim=-1) * has_key
        else:
            probs = alpha.detach() + ~has_key  # a fully masked row samples uniformly
            sample = torch.multinomial(probs.flatten(0, 2), 1).view(alpha.shape[:-1])  # (B,H,T)
            one_hot = F.one_hot(sample, scores.size(-1)).to(q.dtype) * has_key
            if self.cfg.estimator == "straight_through":
                weights = one_hot + alpha - alpha.detach()
            else:
                weights, log_prob, entropy = self._reinforce(alpha, sample, one_hot)
        # 2) the context is the chosen position's value
        context = self.output(weights @ memory.value)  # (B,T,D) from (B,H,T,Dh)
        shown = alpha if ctx.need_weights else None  # α, the distribution the samples come from
        if log_prob is None:
            return AttentionOutput(context, shown)
        term = Reinforce(log_prob, entropy, self.baseline, self.cfg)
        return AttentionOutput(context, shown, loss=term)

    def _reinforce(
        self, alpha: Tensor, sample: Tensor, one_hot: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Weights (B,H,T,S), and log α(ŝ) and H(α), each (B,H,T), for the loss."""
        log_alpha = torch.log(alpha.clamp(min=1e-30))
        log_prob = log_alpha.gather(-1, sample.unsqueeze(-1)).squeeze(-1)  # (B,H,T)
        entropy = -(alpha * log_alpha).sum(-1)  # (B,H,T)
        weights = one_hot
        if self.cfg.expected_prob > 0:
            soft = torch.rand(sample.shape, device=sample.device) < self.cfg.expected_prob
            log_prob = log_prob * ~soft  # soft contexts get exact gradients instead
            weights = torch.where(soft.unsqueeze(-1), alpha, one_hot)
        return weights, log_prob, entropy


@dataclass(frozen=True)
class Reinforce(LossTerm):
    """REINFORCE's loss term for one forward call: log α(ŝ) of the sampled positions
    and the entropy H(α), each (B,H,T), and the layer's moving-average baseline (a
    buffer of :class:`HardAttention`, moved in place once a batch)."""

    log_prob: Tensor
    entropy: Tensor
    baseline: Tensor
    cfg: HardConfig

    def total(
        self, calls: list[Reinforce], reward: Tensor, tgt_mask: Tensor
    ) -> tuple[Tensor, dict[str, float]]:
        """The REINFORCE surrogate of one layer's choices in ``calls``, summed, and
        the reward, baseline and entropy to log; the baseline moves once a batch."""
        chosen = calls
        # Every recorded choice for position t shapes tokens t, t+1, … only: the
        # same reward to go applies to each; their log-probs and entropy bonuses add up.
        log_prob = torch.stack([c.log_prob for c in chosen]).sum(0)  # (B,H,T)
        entropy = torch.stack([c.entropy for c in chosen]).sum(0)  # (B,H,T)
        m = tgt_mask.to(reward.dtype)  # (B,T)
        per_token = (reward * m).sum() / m.sum().clamp(min=1)
        if self.baseline == 0:  # the first update (a reward, −loss, is never 0)
            baseline = leave_one_out(reward, m).unsqueeze(1)  # (B,1)
            self.baseline.fill_(float(per_token))  # where the average starts
        else:
            baseline = self.baseline
        centred = (reward - baseline) * m  # (B,T)
        to_go = centred.flip(-1).cumsum(-1).flip(-1)  # (B,T) A_t = Σ_{t'≥t}
        with torch.no_grad():
            decay = self.cfg.baseline_decay
            self.baseline.mul_(decay).add_((1 - decay) * per_token)
        mh = m.unsqueeze(1)  # (B,1,T)
        # Every head's sample is part of one joint choice: their log-probs add up.
        surrogate = -(to_go.unsqueeze(1).detach() * log_prob * mh).sum()
        entropy = (entropy * mh).sum()
        stats = {  # detached figures for the training log
            "reward": float(per_token),
            "baseline": float(self.baseline),
            "entropy": float(
                entropy.detach() / (len(chosen) * mh.sum() * log_prob.size(1)).clamp(min=1)
            ),
        }
        return surrogate - self.cfg.entropy_weight * entropy, stats
