"""How much signal each hard-attention estimator's gradient carries, per update.

Hard attention's scores are trained only through the estimator: the query and key
projections of the cross-attention (``q_proj``, ``k_proj``) shape nothing else.
For one fixed batch this draws the gradient of those parameters ``--draws`` times
(each draw a fresh sample of attention positions, dropout off) and prints, per
estimator:

- ``SNR``: ‖E g‖ / sqrt(E‖g − E g‖²), the signal-to-noise ratio of one update's
  gradient (the square root of the ratio Roberts & Tedrake, NIPS 2008, call SNR;
  ‖E g‖² estimated without the 1/N bias of the sample mean); above 1 an update
  points the expected way, far below 1 it is mostly noise that Adam's
  normalisation turns into steps of full size;
- ``entropy / signal``: for REINFORCE, the norm of the entropy bonus's gradient
  (λ_e·∇H, deterministic given the batch) over the norm of the mean score-function
  gradient: above 1 the bonus, which pulls α towards uniform, outweighs what the
  reward teaches.

    python benchmarks/estimator_signal.py                          # toy corpus, at init
    python benchmarks/estimator_signal.py --init runs/compare-toy/runs/hard/seed1

``--init RUN`` starts from RUN's best.pt (any hard-attention run of the same recipe).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
from common import recipe_trainer

from nmt.io import checkpoint

ESTIMATORS = {  # name -> attention overrides
    "reinforce": ["model.attention.estimator=reinforce"],
    "reinforce, entropy_weight 0": [
        "model.attention.estimator=reinforce",
        "model.attention.entropy_weight=0.0",
    ],
    "reinforce, expected_prob 0.5": [
        "model.attention.estimator=reinforce",
        "model.attention.expected_prob=0.5",
    ],
    "straight_through": ["model.attention.estimator=straight_through"],
    "gumbel": ["model.attention.estimator=gumbel"],
}


def score_gradients(trainer, batch, draws: int) -> torch.Tensor:  # (draws, P)
    """The flattened gradient of every cross-attention q_proj/k_proj parameter of
    the per-token training objective, once per draw (draw i seeded with i)."""
    params = [
        p
        for n, p in trainer.model.named_parameters()
        if ".cross_attn." in n and (".q_proj." in n or ".k_proj." in n)
    ]
    trainer.model.train()
    out = []
    for i in range(draws):
        torch.manual_seed(i)
        trainer.model.zero_grad(set_to_none=True)
        loss = trainer.loss(batch).total
        (loss / batch.tgt_tokens).backward()
        out.append(torch.cat([p.grad.flatten() for p in params]))
    return torch.stack(out)


def signal_and_noise(grads: torch.Tensor) -> tuple[float, float]:
    """‖E g‖ and sqrt(E‖g − E g‖²) from draws (N, P); ‖E g‖² is estimated as
    ‖mean‖² − noise²/N, since the sample mean carries 1/N of the noise."""
    n = grads.size(0)
    mean = grads.mean(0)
    noise = (grads - mean).pow(2).sum(1).sum() / (n - 1)
    signal = (mean.pow(2).sum() - noise / n).clamp(min=0)
    return float(signal.sqrt()), float(noise.sqrt())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipe", default="recipes/toy.yaml")
    ap.add_argument("--data", default="data/toy")
    ap.add_argument("--init", type=Path, help="a run directory whose best.pt to start from")
    ap.add_argument("--draws", type=int, default=64)
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    rows = []
    grads = {}
    for name, extra in ESTIMATORS.items():
        with tempfile.TemporaryDirectory() as run_dir:
            overrides = ["model.attention.kind=hard", "model.dropout=0.0", *args.overrides]
            trainer = recipe_trainer(args.recipe, args.data, run_dir, "cpu", overrides + extra)
            if args.init is not None:
                weights = checkpoint.load(args.init / "best.pt")["model"]
                trainer.model.load_state_dict(weights)
            budget = trainer.cfg.train.batch_tokens
            batch = trainer.data.train.collate(trainer.data.train.epoch_batches(budget, 0, 0)[0])
            grads[name] = score_gradients(trainer, batch, args.draws)
        rows.append((name, *signal_and_noise(grads[name])))
    # λ_e·∇H: the same draws with and without the bonus differ by exactly it
    bonus = (grads["reinforce"] - grads["reinforce, entropy_weight 0"]).mean(0)
    signal, _ = signal_and_noise(grads["reinforce, entropy_weight 0"])
    print(f"\n{args.draws} draws on one batch of {args.recipe}; init: {args.init or 'random'}")
    print(f"{'estimator':32s} {'SNR':>8s} {'‖E g‖':>10s} {'noise':>10s}")
    for name, sig, noise in rows:
        print(f"{name:32s} {sig / noise:8.3f} {sig:10.2e} {noise:10.2e}")
    if signal > 0:
        print(f"REINFORCE entropy bonus / signal: {float(bonus.norm()) / signal:.2f}")
    else:  # the sample mean is all noise at this many draws
        print(f"REINFORCE signal not measurable with {args.draws} draws; use more")


if __name__ == "__main__":
    main()
