"""A study's spec (`nmt compare`'s recipe): a base recipe, named variants as ``--set``
overrides, seeds, splits, the significance rule, the launcher; and its plan of runs."""

from __future__ import annotations

import dataclasses
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from nmt.errors import ConfigError, NmtError
from nmt.setup.config import apply_overrides, check, check_seed, from_dict, read_yaml
from nmt.setup.decoding import decoding, with_overrides
from nmt.setup.migrations import refuse_moved_keys
from nmt.setup.plugins import with_plugins
from nmt.setup.recipe import RunConfig, read_recipe
from nmt.setup.registry import Registry
from nmt.setup.training import TrainConfig

MAX_RESAMPLES = 100_000  # the bootstrap holds (resamples × sentences) counts in memory
# Bounds on what one spec may ask for: every run is planned (its recipe built and
# checked) before any trains, and each contrast, bucket and heatmap line is a test, a
# bar or a figure per variant.
MAX_RUNS = 1_000
MAX_ITEMS = 100
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")  # becomes a directory name


# Where a study's runs train, by launcher.kind: each a nmt.launch.runs.Launcher,
# imported when a study uses it; a plug-in adds one with LAUNCHERS.register.
LAUNCHERS = Registry("launcher", base="nmt.launch.runs:Launcher")
LAUNCHERS.register("local", target="nmt.launch.pool:LocalLauncher")
LAUNCHERS.register("slurm", target="nmt.launch.slurm:SlurmLauncher")


@dataclass(frozen=True)
class LauncherSpec:
    """Where a study's runs train (docs/cluster.md): ``local``, this machine, ``--jobs``
    at a time; ``slurm``, every unfinished run as one job of a SLURM job array
    through submitit (nmt.launch.slurm), with these resources per run."""

    kind: str = "local"  # a name in LAUNCHERS
    partition: str | None = None  # null: the cluster's default
    time: int = 240  # minutes per job; a job cut at its limit is requeued and resumes
    cpus: int = 2  # CPUs per run (its PyTorch threads)
    gpus: int = 0  # GPUs per run (then --device cuda)
    mem_gb: float | None = None  # null: the partition's default
    account: str | None = None
    max_running: int | None = None  # jobs of the array running at once; null: no cap
    sbatch: dict[str, str] = field(default_factory=dict)  # any other option, e.g. {qos: high}

    def __post_init__(self) -> None:
        check(LAUNCHERS.known(self.kind), "kind", LAUNCHERS.unknown(self.kind))
        check(1 <= self.time <= 525_600, "time", "must be 1..525,600 minutes (a year)")
        check(1 <= self.cpus <= 4096, "cpus", "must be in 1..4,096")
        check(0 <= self.gpus <= 64, "gpus", "must be in 0..64")
        check(
            self.mem_gb is None or 1 / 1024 <= self.mem_gb <= 2**20,
            "mem_gb",
            "must be at least 0.001 (1 MB: SLURM reads --mem=0 as all of a node's memory)",
        )
        check(
            self.max_running is None or 1 <= self.max_running <= 100_000,
            "max_running",
            "must be in 1..100,000 (or null)",
        )
        for key, value in self.sbatch.items():
            check(bool(re.fullmatch(r"[a-z][a-z0-9_-]*", key)), f"sbatch.{key}", "not an option")
            check(
                str(value).isprintable(),
                f"sbatch.{key}",
                "a line break or control character would end the #SBATCH line",
            )


SCORES = ("chrf++", "ter")  # CompareSpec.scores: what sacreBLEU reports beside BLEU and chrF


@dataclass(frozen=True)
class SignificanceSpec:
    """How a difference from the baseline is tested (docs/compare.md). ``bootstrap``:
    Koehn's paired bootstrap on seed-averaged BLEU; ``paired_bs`` / ``paired_ar``:
    sacreBLEU's paired bootstrap / approximate randomisation on the seeds pooled (each
    seed's test set appended, paired seed by seed), for any of its metrics."""

    test: Literal["bootstrap", "paired_bs", "paired_ar"] = "bootstrap"
    metrics: tuple[str, ...] = ("bleu",)  # the first decides; paired_*: bleu, chrf, ter
    samples: int = 0  # paired_*: resamples (bs) or trials (ar); 0 = sacreBLEU's default
    alpha: float = 0.05

    def __post_init__(self) -> None:
        check(bool(self.metrics), "metrics", "name at least one metric")
        unknown = [m for m in self.metrics if m not in ("bleu", "chrf", "ter")]
        check(not unknown, "metrics", f"unknown {', '.join(unknown)}; valid: bleu, chrf, ter")
        check(
            self.test != "bootstrap" or self.metrics == ("bleu",),
            "metrics",
            "test bootstrap scores BLEU only; use paired_bs or paired_ar for chrf and ter",
        )
        check(
            0 <= self.samples <= MAX_RESAMPLES,
            "samples",
            f"must be in 0..{MAX_RESAMPLES:,} (0: sacreBLEU's default)",
        )
        check(0 < self.alpha < 1, "alpha", "must be in (0, 1)")


@dataclass(frozen=True)
class CompareSpec:
    """``nmt compare SPEC.yaml``; paths are relative to the working directory, as in
    recipes."""

    base: str  # the recipe every variant starts from
    out_dir: str  # runs/, report.md, results.{csv,json}, *.png
    variants: dict[str, tuple[str, ...]]  # name -> ["model.attention.kind=local_m", ...]
    baseline: str | None = None  # p-values against this variant (default: the first)
    contrasts: tuple[tuple[str, ...], ...] = ()  # more pairs to test: [variant, reference]
    seeds: tuple[int, ...] = (1,)
    set: tuple[str, ...] = ()  # overrides for every variant (budgets, data.dir, ...)
    splits: tuple[str, ...] | None = None  # test splits (default: the base's data.test)
    bootstrap: int = 1000  # resamples (Koehn 2004)
    length_buckets: tuple[int, ...] = (10, 20, 30, 40)  # source-word bucket upper bounds
    heatmaps: tuple[int, ...] = (0, 1)  # lines of the first split drawn for every variant
    # the PNG figures (BLEU by length, dev curves, attention grids); false: the tables,
    # verdicts and report.html's own heatmaps only, seconds sooner a report
    figures: bool = True
    ensemble: bool = (
        False  # also score each variant's seeds as one ensemble (nmt.compare.ensembles)
    )
    significance: SignificanceSpec = field(default_factory=SignificanceSpec)
    # corpus scores reported beside BLEU and chrF, mean ± std over seeds: chrf++ (chrF
    # with word bigrams, Popović 2017) and ter (Snover et al. 2006; its edit distance
    # grows with the square of a sentence's length: joined splits take minutes)
    scores: tuple[str, ...] = ("chrf++",)
    launcher: LauncherSpec = field(default_factory=LauncherSpec)
    plugins: tuple[str, ...] = ()  # imported first, and stored in every run (nmt.setup.plugins)
    # other decodings of every trained run, no retraining: name -> decode.KEY=VALUE
    # overrides and/or length=oracle; each reported as the variant VARIANT@NAME
    decodings: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check(bool(self.variants), "variants", "name at least one variant")
        unknown = [m for m in self.scores if m not in SCORES]
        check(not unknown, "scores", f"unknown {', '.join(unknown)}; valid: {', '.join(SCORES)}")
        check(len(set(self.scores)) == len(self.scores), "scores", "a score named twice")
        for name in self.variants:
            check(bool(NAME.match(name)), f"variants.{name}", "use letters, digits, _ . + -")
        check(len(self.decodings) <= MAX_ITEMS, "decodings", f"at most {MAX_ITEMS} entries")
        for name, entries in self.decodings.items():
            check(bool(NAME.match(name)), f"decodings.{name}", "use letters, digits, _ . + -")
            check(bool(entries), f"decodings.{name}", "give decode.KEY=VALUE or length=oracle")
        check(
            self.baseline is None or self.baseline in self.variants,
            "baseline",
            f"{self.baseline!r} is not a variant; variants: {', '.join(self.variants)}",
        )
        for i, pair in enumerate(self.contrasts):
            key = f"contrasts[{i}]"
            check(len(pair) == 2, key, f"give two variants, [variant, reference]; got {len(pair)}")
            unknown = [n for n in pair if n not in self.names]
            check(
                not unknown,
                key,
                f"{', '.join(map(repr, unknown))} is not a variant; variants: "
                f"{', '.join(self.names)}",
            )
            check(pair[0] != pair[1], key, "a variant against itself")
        check(len(set(self.contrasts)) == len(self.contrasts), "contrasts", "a pair named twice")
        runs = len(self.variants) * len(self.seeds)
        check(
            runs <= MAX_RUNS,
            "seeds",
            f"{len(self.variants):,} variant{'s' * (len(self.variants) > 1)} x "
            f"{len(self.seeds):,} seeds is {runs:,} runs; "
            f"a study holds at most {MAX_RUNS:,}",
        )
        for key in ("contrasts", "length_buckets", "heatmaps"):
            check(len(getattr(self, key)) <= MAX_ITEMS, key, f"at most {MAX_ITEMS} entries")
        check(bool(self.seeds), "seeds", "give at least one seed")
        check(len(set(self.seeds)) == len(self.seeds), "seeds", "seeds must differ")
        for i, seed in enumerate(self.seeds):
            check_seed(seed, f"seeds[{i}]")
        check(
            100 <= self.bootstrap <= MAX_RESAMPLES,
            "bootstrap",
            f"use 100..{MAX_RESAMPLES:,} resamples",
        )
        edges = self.length_buckets
        check(
            bool(edges) and edges[0] > 0 and all(a < b for a, b in itertools.pairwise(edges)),
            "length_buckets",
            "must be positive and increasing",
        )
        check(all(i >= 0 for i in self.heatmaps), "heatmaps", "line numbers start at 0")

    @property
    def baseline_name(self) -> str:
        return self.baseline or next(iter(self.variants))

    @property
    def names(self) -> list[str]:
        """What the report compares: every trained variant, then each decoding of each
        (``VARIANT@DECODING``)."""
        decoded = [f"{v}@{d}" for d in self.decodings for v in self.variants]
        return [*self.variants, *decoded]


@dataclass(frozen=True)
class PlannedRun:
    variant: str
    seed: int
    run_dir: Path
    recipe: dict[str, Any]  # the full recipe as requested (before data-derived values)
    cfg: RunConfig


RECIPE_SECTIONS = ("data", "model", "train", "decode", "run_dir")


def with_spec_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """A spec with ``--set`` applied: a spec key (``seeds=[1,2,3]``), or ``set+=KEY=VALUE``,
    which appends one recipe override to the spec's ``set`` list (every variant takes
    it). A recipe key given as if it were a spec key is refused, saying so."""
    plain = []
    for text in overrides:
        key, _, value = text.partition("=")
        if key.strip() == "set+":
            given = raw.get("set") or []
            if not isinstance(given, list):
                raise NmtError(f"--set {text}: the spec's set is not a list")
            raw = {**raw, "set": [*given, value]}
        elif key.strip().split(".")[0] in RECIPE_SECTIONS:
            raise NmtError(
                f"--set {text}: a recipe key, not a spec key; every variant takes recipe keys "
                f"from the spec's set list: add one with --set 'set+={text}'"
            )
        else:
            plain.append(text)
    return apply_overrides(raw, plain)


def tracking(train: TrainConfig, out: Path, variant: str, seed: int) -> dict[str, Any]:
    """Where a study's run logs (train keys), for the trackers it logs to: one place
    for the whole study (``tensorboard --logdir OUT/tb``, ``OUT/mlflow.db``,
    ``OUT/wandb``), the study as the experiment, ``VARIANT/seedN`` as the run's
    name and the variant and seed as tags. An MLflow URI, a W&B directory, an
    experiment or a run name the spec sets (``set:``) stays."""
    keys = {}
    if "tensorboard" in train.log_to:  # a directory per run, as TensorBoard expects
        keys["tensorboard_dir"] = str(out / "tb" / variant / f"seed{seed}")
    if "mlflow" in train.log_to and train.mlflow_uri is None:
        keys["mlflow_uri"] = f"sqlite:///{(out / 'mlflow.db').resolve()}"
    if "wandb" in train.log_to and train.wandb_dir is None:
        keys["wandb_dir"] = str(out)
    if any(t in train.log_to for t in ("mlflow", "wandb")):
        if train.experiment == "nmt":
            keys["experiment"] = out.name
        if train.run_name is None:
            keys["run_name"] = f"{variant}/seed{seed}"
        keys["tags"] = {**train.tags, "variant": variant, "seed": str(seed)}
    return keys


def load_spec(
    path: str | Path, overrides: list[str] | None = None, plugins: tuple[str, ...] = ()
) -> tuple[CompareSpec, list[PlannedRun]]:
    """Read and check a spec (with ``--set`` overrides of its own keys, e.g.
    ``seeds=[1,2,3]``, and ``plugins`` added to its own) and every run it implies;
    errors name the spec file and key (a bad override in a variant names the
    variant)."""
    path = Path(path)
    if path.is_dir():
        raise NmtError(
            f"{path}: a directory, not a spec; to compare existing runs: "
            f"nmt compare --runs {path} --runs OTHER --out DIR"
        )
    raw = with_spec_overrides(read_yaml(path), overrides or [])
    if "run_dir" in raw and "variants" not in raw:
        raise NmtError(
            f"{path}: a recipe, not a comparison spec; train it with nmt train {path}, "
            "or name it as a spec's base (docs/compare.md)"
        )
    try:
        spec = from_dict(CompareSpec, with_plugins(raw, plugins))
    except (ConfigError, NmtError) as e:
        raise NmtError(f"{path}: {e}") from None
    base = read_recipe(spec.base)
    out = Path(spec.out_dir)
    runs = []
    for variant, overrides in spec.variants.items():
        for seed in spec.seeds:
            run_dir = out / "runs" / variant / f"seed{seed}"
            sets = [*spec.set, *overrides, f"train.seed={seed}", f"run_dir={run_dir}"]
            try:
                recipe = with_plugins(apply_overrides(base, sets), spec.plugins)
                refuse_moved_keys(recipe, "the recipe")
                logging = tracking(from_dict(RunConfig, recipe).train, out, variant, seed)
                recipe = {**recipe, "train": {**recipe.get("train", {}), **logging}}
                cfg = from_dict(RunConfig, recipe)
            except (ConfigError, NmtError) as e:
                raise NmtError(f"{path}: variant {variant!r}: {e}") from None
            runs.append(PlannedRun(variant, seed, run_dir, recipe, cfg))
    splits = spec.splits or runs[0].cfg.data.test
    if not splits:
        raise NmtError(f"{path}: splits: none given and {spec.base} has no data.test")
    for name, entries in spec.decodings.items():
        try:
            overrides, _ = decoding(entries)
            for run in runs:
                with_overrides(run.cfg.decode, overrides)
        except NmtError as e:
            raise NmtError(f"{path}: decodings.{name}: {e}") from None
    return dataclasses.replace(spec, splits=tuple(splits)), runs
