"""The recipe's ``train`` section: optimisation, budget, validation and the training
regime (``trainer``, whose options are the regime's own config)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Literal

from nmt.setup.config import by_kind, check, check_seed
from nmt.setup.registry import Registry


@dataclass(frozen=True)
class TrainerConfig:
    """Base of every training regime's options (``train.trainer``); ``teacher_forcing``
    takes none, others register a subclass (``scheduled_sampling``:
    :class:`ScheduledSamplingConfig`)."""

    kind: str = "teacher_forcing"


@dataclass(frozen=True)
class ScheduledSamplingConfig(TrainerConfig):
    """``train.trainer`` with ``kind: scheduled_sampling``: two-pass scheduled sampling
    (Mihaylova & Martins 2019); ``passes`` > 2 is Duckworth et al. 2019's parallel
    scheduled sampling."""

    schedule: Literal["linear", "exponential", "inverse_sigmoid", "constant"] = "inverse_sigmoid"
    # linear: start (<= 1); exponential: base (< 1); inverse_sigmoid: k >= 1; constant: ε.
    # null: the schedule's default (DEFAULT_K), one that decays; constant needs a value.
    k: float | None = None
    c: float = 1e-4  # linear: decrease per step
    eps_min: float = 0.0  # linear: floor
    warmup_steps: int = 0  # pure teacher forcing first
    mix: Literal["argmax", "sample", "topk", "softmax", "gumbel"] = "softmax"
    topk: int = 5
    temperature: float = 1.0  # softmax and gumbel
    passes: int = 2
    first_pass_grad: bool = False

    def __post_init__(self) -> None:
        s = self.schedule
        check(self.k is not None or s != "constant", "k", "constant schedule needs k (ε, 0..1)")
        if self.k is None:
            object.__setattr__(self, "k", DEFAULT_K[s])
        if s == "exponential":
            check(0 < self.k < 1, "k", "exponential schedule needs 0 < k < 1")
        elif s == "inverse_sigmoid":
            check(self.k >= 1, "k", "inverse_sigmoid schedule needs k >= 1")
        elif s == "constant":
            check(0 <= self.k <= 1, "k", "constant schedule needs 0 <= k <= 1")
        else:  # linear: max(eps_min, k − c·i) must fall below 1
            check(
                0 <= self.k <= 1,
                "k",
                "linear schedule starts at 0 <= k <= 1 (delay it with warmup_steps)",
            )
            check(self.c > 0, "c", "linear schedule needs c > 0, else ε stays k")
            check(self.eps_min < 1, "eps_min", "linear schedule needs eps_min < 1, else ε stays 1")
        check(0 <= self.c <= 1, "c", "must be in [0, 1]")
        check(0 <= self.eps_min <= 1, "eps_min", "must be in [0, 1]")
        check(self.warmup_steps >= 0, "warmup_steps", "must be non-negative")
        check(self.topk >= 1, "topk", "must be at least 1")
        # Below 1e-3, logits / temperature overflow float32 (inf − inf = NaN in the mix).
        check(1e-3 <= self.temperature <= 100, "temperature", "must be in 0.001..100")
        check(self.passes >= 2, "passes", "must be at least 2")

    def inert_keys(self) -> dict[str, str]:
        inert = {}
        if self.schedule != "linear":
            why = f"only schedule linear uses it (schedule is {self.schedule!r})"
            inert.update(c=why, eps_min=why)
        if self.mix != "topk":
            inert["topk"] = f"only mix topk uses it (mix is {self.mix!r})"
        if self.mix not in ("softmax", "gumbel"):
            inert["temperature"] = f"only mix softmax and gumbel use it (mix is {self.mix!r})"
        return inert


# ε_i = 1 − o(1) at the start, falling over a few thousand updates: linear reaches 0.9
# after 1,000 updates (c = 1e-4), exponential after ~1,050, inverse sigmoid (Bengio et
# al. 2015's curve) after ~10,800.
# train.log_to: jsonl always, and any of the trackers of nmt.training.trackers
LOG_TO = ("jsonl", "tensorboard", "mlflow", "wandb")
DEFAULT_K = {"linear": 1.0, "exponential": 0.9999, "inverse_sigmoid": 2000.0}


# The training regimes: config, and the objective (nmt.training.objective) imported
# when a run starts.
TRAINERS = Registry("trainer")
TRAINERS.register("teacher_forcing", TrainerConfig, "nmt.training.objective:TeacherForcing")
TRAINERS.register(
    "scheduled_sampling",
    ScheduledSamplingConfig,
    "nmt.training.scheduled_sampling:ScheduledSampling",
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
class LengthCurriculum:
    """Short pairs first (nmt.training.curriculum; Platanios et al. 2019): ``start``,
    the share of the training pairs, shortest first, that the first update draws from;
    ``steps``, the update from which it draws from every pair."""

    start: float = 0.1
    steps: int = 1000

    def __post_init__(self) -> None:
        check(0 < self.start <= 1, "start", "must be in (0, 1]")
        check(1 <= self.steps <= 2**31 - 1, "steps", "must be in 1..2,147,483,647")


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
    # a batch-size schedule: [[U, A], ...], after U updates A batches per update
    # (before the first U: accumulate), for larger updates late in training, as the
    # batch size that pays grows while the loss falls (McCandlish et al. 2018)
    accumulate_schedule: tuple[tuple[int, ...], ...] = ()
    # a length curriculum: the shortest pairs first, every pair from update `steps`
    # on (nmt.training.curriculum); null: every pair from the start
    length_curriculum: LengthCurriculum | None = None
    lr: float = 7e-4  # peak learning rate, reached after warmup steps
    warmup: int = 1000
    # after the warm-up: inverse_sqrt (open-ended), or cosine / linear to zero at
    # max_steps (nmt.training.lr_schedule)
    lr_schedule: Literal["inverse_sqrt", "cosine", "linear"] = "inverse_sqrt"
    # adam for every parameter; muon (Jordan et al. 2024, torch.optim.Muon) for the
    # weight matrices of the layers, Adam for embeddings, norms, biases and the rest
    # (nmt.training.optimizers)
    optimizer: Literal["adam", "muon"] = "adam"
    # muon: the peak learning rate of the matrices (it follows train.lr_schedule as
    # train.lr does); null: train.lr, which Muon's update (scaled to match AdamW's
    # RMS, Liu et al. 2025) can reuse
    muon_lr: float | None = None
    muon_momentum: float = 0.95
    betas: tuple[float, ...] = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.0
    clip_norm: float = 1.0  # 0 disables gradient clipping
    label_smoothing: float = 0.1
    max_epochs: int | None = None
    max_steps: int | None = None
    max_minutes: float | None = None
    valid_every: int = 1000  # steps between validations (and last.pt saves)
    # also save last.pt every this many steps between validations, so that a run
    # killed outright (SIGKILL, a lost machine: no signal to save on) resumes from at
    # most this far back; null: at validations (and on SIGINT/SIGTERM) only
    save_every: int | None = None
    keep_checkpoints: int = 0  # also keep the last N validations' weights, RUN/step-STEP.pt
    # an exponential moving average of the weights with this decay per update, which
    # validation scores and checkpoints hold (nmt.training.ema); null: off
    ema: float | None = None
    ema_start: int = 0  # updates before the average starts (until then: the weights)
    valid_bleu: bool = True  # greedy-decode the dev set and report BLEU
    early_stopping: Literal["bleu", "loss"] = "bleu"
    patience: int | None = None  # validations without improvement before stopping
    log_every: int = 50
    # guided alignment: an attention loss against gold word alignments; null: off
    alignment: GuidedAlignment | None = None
    # where metrics go: jsonl (RUN/metrics.jsonl, always: compare and resume read it),
    # tensorboard, mlflow, wandb (optional extras; nmt.training.trackers)
    log_to: tuple[str, ...] = ("jsonl",)
    tensorboard_dir: str | None = None  # default RUN_DIR/tb
    mlflow_uri: str | None = None  # an MLflow tracking URI; default sqlite:///RUN_DIR/mlflow.db
    wandb_dir: str | None = None  # where W&B's offline runs go; default RUN_DIR
    experiment: str = "nmt"  # MLflow's experiment, W&B's project
    run_name: str | None = None  # the run's name in MLflow and W&B; default run_dir
    # more tags of the run in MLflow and W&B (nmt compare adds variant and seed)
    tags: dict[str, str] = field(default_factory=dict)
    # MLflow and W&B keep best.pt among the run's files after its evaluation (beside
    # the recipe, the vocabularies and the scores); false: all but the checkpoint
    log_checkpoint: bool = True
    max_bad_steps: int = 20  # consecutive non-finite losses before the run stops
    compile: bool = False  # torch.compile the teacher-forced pass of training (Transformer.states)
    # matmul precision: auto = bf16 autocast on CUDA, fp32 on the CPU; bf16 on the CPU pays
    # where it has bf16 matrix units (AMX, AVX512-BF16), parameters and optimiser stay fp32
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    # auto: cheaper CPU dropout masks and the output layer fused with the loss
    # (nmt.kernels); off: the plain PyTorch model and loss, the same function
    kernels: Literal["auto", "off"] = "auto"

    def inert_keys(self) -> dict[str, str]:
        inert = {}
        if self.optimizer != "muon":
            why = f"only optimizer muon uses it (optimizer is {self.optimizer!r})"
            inert.update(muon_lr=why, muon_momentum=why)
        if self.ema is None:
            inert["ema_start"] = "only an ema decay uses it (ema is null)"
        return inert

    def __post_init__(self) -> None:
        self.check_batches()
        self.check_outputs()
        check_seed(self.seed, "seed")
        self.check_optimiser()
        self.check_budget()

    def check_batches(self) -> None:
        """Batch sizes, gradient accumulation and the length curriculum."""
        for name in ("batch_tokens", "accumulate", "valid_every", "log_every", "max_bad_steps"):
            check(getattr(self, name) >= 1, name, "must be at least 1")
        check(self.batch_tokens <= 2**26, "batch_tokens", "must be at most 67,108,864")
        check(self.accumulate <= 2**16, "accumulate", "must be at most 65,536")
        pairs = self.accumulate_schedule
        check(
            all(len(p) == 2 and p[0] >= 1 and 1 <= p[1] <= 2**16 for p in pairs),
            "accumulate_schedule",
            "must be [update, batches] pairs, update >= 1 and batches in 1..65,536",
        )
        check(
            all(a[0] < b[0] for a, b in itertools.pairwise(pairs)),
            "accumulate_schedule",
            "its updates must increase",
        )
        check(
            self.length_curriculum is None or self.batching == "bucketed",
            "length_curriculum",
            "needs train.batching: bucketed (a random batch's longest pair stands for none of it)",
        )

    def check_outputs(self) -> None:
        """What a run keeps: checkpoints, EMA weights, and where it logs."""
        check(0 <= self.keep_checkpoints <= 10_000, "keep_checkpoints", "must be in 0..10,000")
        check(
            self.save_every is None or self.save_every >= 1,
            "save_every",
            "must be at least 1 (or null: last.pt at validations only)",
        )
        check(self.ema is None or 0 < self.ema < 1, "ema", "must be in (0, 1) (or null: off)")
        check(0 <= self.ema_start <= 2**31 - 1, "ema_start", "must be in 0..2,147,483,647")
        unknown = sorted(set(self.log_to) - set(LOG_TO))
        check(not unknown, "log_to", f"unknown {', '.join(unknown)}; valid: {', '.join(LOG_TO)}")
        check("jsonl" in self.log_to, "log_to", "must include jsonl (compare and resume read it)")
        for key, tracker in (("tensorboard_dir", "tensorboard"), ("mlflow_uri", "mlflow"),
                             ("wandb_dir", "wandb")):  # fmt: skip
            check(
                getattr(self, key) is None or tracker in self.log_to,
                key,
                f"only train.log_to: [jsonl, {tracker}] uses it",
            )
        check(bool(self.experiment.strip()), "experiment", "must not be empty")
        check(all(k.strip() for k in self.tags), "tags", "a tag's name must not be empty")

    def check_optimiser(self) -> None:
        """The optimiser's and the learning-rate schedule's settings."""
        check(0 < self.lr <= 10, "lr", "must be in (0, 10]")
        check(
            self.muon_lr is None or 0 < self.muon_lr <= 10,
            "muon_lr",
            "must be in (0, 10] (or null)",
        )
        # 0 divides by zero where a gradient is zero; a float32 rounds below 1e-30 to it
        check(1e-30 <= self.eps <= 1, "eps", "must be in 1e-30..1")
        check(0 <= self.weight_decay <= 1, "weight_decay", "must be in [0, 1]")
        check(0 <= self.muon_momentum < 1, "muon_momentum", "must be in [0, 1)")
        check(self.warmup >= 0, "warmup", "must be non-negative")
        check(
            self.lr_schedule == "inverse_sqrt" or self.max_steps is not None,
            "lr_schedule",
            f"{self.lr_schedule} decays to zero at train.max_steps: set it",
        )
        check(
            self.lr_schedule == "inverse_sqrt" or self.max_steps > self.warmup,
            "warmup",
            "must be below train.max_steps, where the schedule ends",
        )
        check(
            len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas),
            "betas",
            "must be two numbers in [0, 1)",
        )
        check(0 <= self.clip_norm <= 1e6, "clip_norm", "must be in [0, 1,000,000] (0: no clipping)")
        check(0 <= self.label_smoothing < 1, "label_smoothing", "must be in [0, 1)")

    def check_budget(self) -> None:
        """When training stops: the budget, early stopping."""
        check(
            self.valid_bleu or self.early_stopping != "bleu",
            "early_stopping",
            "bleu needs train.valid_bleu: true (or use early_stopping: loss)",
        )
        for name in ("max_epochs", "max_steps", "max_minutes", "patience"):
            value = getattr(self, name)
            check(value is None or 0 < value < math.inf, name, "must be positive (or null)")
        check(
            any(getattr(self, n) is not None for n in ("max_epochs", "max_steps", "max_minutes")),
            "max_epochs",
            "set a budget: train.max_epochs, train.max_steps or train.max_minutes",
        )
