"""The recipe's ``train`` section: optimisation, budget, validation and the training
regime (``trainer``, whose options are the regime's own config)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from nmt.config import by_kind, check, check_seed
from nmt.registry import Registry


@dataclass(frozen=True)
class TrainerConfig:
    """Base of every training regime's options (``train.trainer``); ``teacher_forcing``
    takes none, others register a subclass (``scheduled_sampling``:
    nmt.training.sampling_schedule)."""

    kind: str = "teacher_forcing"


# The training regimes, each registered with its config; the modules are imported at
# the first lookup (nmt.registry), so that this module stays light.
TRAINERS: Registry[type] = Registry(
    "trainer", modules=("nmt.training.trainer", "nmt.training.scheduled_sampling")
)


@dataclass(frozen=True)
class GuidedAlignment:
    """Supervise cross-attention with gold word alignments (Liu et al. 2016; Garg et
    al. 2019): ``weight`` times the cross-entropy of the attention of decoder layer
    ``layer`` (negative counts from the last), heads 0..``heads``−1, against the
    normalised alignment matrix (nmt.training.guided_alignment). ``file``: Pharaoh
    alignments line by line with the training split (default
    ``{data.dir}/{data.train}.align``)."""

    weight: float = 0.05  # Garg et al.'s λ
    layer: int = -2  # Garg et al. supervise the penultimate layer
    heads: int = 1  # ... and one head of it
    file: str | None = None

    def __post_init__(self) -> None:
        check(0 < self.weight <= 100, "weight", "must be in (0, 100]")
        check(self.heads >= 1, "heads", "must be at least 1")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation, budget, validation and early stopping."""

    trainer: TrainerConfig = field(
        default_factory=TrainerConfig, metadata=by_kind(TRAINERS, "teacher_forcing")
    )
    seed: int = 1
    batch_tokens: int = 4096  # padded source or target tokens per batch, whichever is larger
    batching: Literal["bucketed", "random"] = "bucketed"  # batch composition (see batching.py)
    accumulate: int = 1  # gradient accumulation: batches per update
    lr: float = 7e-4  # peak learning rate, reached after warmup steps
    warmup: int = 1000
    betas: tuple[float, ...] = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.0
    clip_norm: float = 1.0  # 0 disables gradient clipping
    label_smoothing: float = 0.1
    max_epochs: int | None = None
    max_steps: int | None = None
    max_minutes: float | None = None
    valid_every: int = 1000  # steps between validations (and last.pt saves)
    keep_checkpoints: int = 0  # also keep the last N validations' weights, RUN/step-STEP.pt
    valid_bleu: bool = True  # greedy-decode the dev set and report BLEU
    early_stopping: Literal["bleu", "loss"] = "bleu"
    patience: int | None = None  # validations without improvement before stopping
    log_every: int = 50
    # guided alignment: an attention loss against gold word alignments; null: off
    alignment: GuidedAlignment | None = None
    # where metrics go: jsonl (RUN/metrics.jsonl, always: compare and resume read it)
    # and tensorboard (the tensorboard extra; nmt.training.tensorboard)
    log_to: tuple[str, ...] = ("jsonl",)
    tensorboard_dir: str | None = None  # default RUN_DIR/tb
    max_bad_steps: int = 20  # consecutive non-finite losses before the run stops
    compile: bool = False  # torch.compile the model's teacher-forced forward pass
    # matmul precision: auto = bf16 autocast on CUDA, fp32 on the CPU; bf16 on the CPU pays
    # where it has bf16 matrix units (AMX, AVX512-BF16), parameters and optimiser stay fp32
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    # auto: cheaper CPU dropout masks and the output layer fused with the loss
    # (nmt.kernels); off: the plain PyTorch model and loss, the same function
    kernels: Literal["auto", "off"] = "auto"

    def __post_init__(self) -> None:
        for name in ("batch_tokens", "accumulate", "valid_every", "log_every", "max_bad_steps"):
            check(getattr(self, name) >= 1, name, "must be at least 1")
        check(self.batch_tokens <= 2**26, "batch_tokens", "must be at most 67,108,864")
        check(self.accumulate <= 2**16, "accumulate", "must be at most 65,536")
        check(0 <= self.keep_checkpoints <= 10_000, "keep_checkpoints", "must be in 0..10,000")
        unknown = sorted(set(self.log_to) - {"jsonl", "tensorboard"})
        check(not unknown, "log_to", f"unknown {', '.join(unknown)}; valid: jsonl, tensorboard")
        check("jsonl" in self.log_to, "log_to", "must include jsonl (compare and resume read it)")
        check(
            self.tensorboard_dir is None or "tensorboard" in self.log_to,
            "tensorboard_dir",
            "only train.log_to: [jsonl, tensorboard] uses it",
        )
        check_seed(self.seed, "seed")
        check(self.lr > 0, "lr", "must be positive")
        check(self.warmup >= 0, "warmup", "must be non-negative")
        check(
            len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas),
            "betas",
            "must be two numbers in [0, 1)",
        )
        check(
            self.valid_bleu or self.early_stopping != "bleu",
            "early_stopping",
            "bleu needs train.valid_bleu: true (or use early_stopping: loss)",
        )
        check(self.clip_norm >= 0, "clip_norm", "must be non-negative")
        check(0 <= self.label_smoothing < 1, "label_smoothing", "must be in [0, 1)")
        for name in ("max_epochs", "max_steps", "max_minutes", "patience"):
            value = getattr(self, name)
            check(value is None or value > 0, name, "must be positive (or null)")
        check(
            any(getattr(self, n) is not None for n in ("max_epochs", "max_steps", "max_minutes")),
            "max_epochs",
            "set a budget: train.max_epochs, train.max_steps or train.max_minutes",
        )
