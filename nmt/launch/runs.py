"""A study's run bookkeeping: what a run was asked for (and whether a finished one can
be reused for it), what "done" means, bringing one run to "trained and evaluated"
(reuse what is finished, resume what was interrupted, train the rest), every
finished run evaluated again under the study's other decodings (by whoever trained
it, as soon as it is tested, so that a study stopped later keeps them), and failures
recorded, not fatal, then named in one error. The launchers that run many
(nmt.launch.pool on this machine, nmt.launch.slurm on a cluster) build on these."""

from __future__ import annotations

import contextlib
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from nmt.decoding.evaluate import evaluate, read_results
from nmt.errors import NmtError
from nmt.io.files import write_text
from nmt.io.rundir import flatten
from nmt.progress import console, warn
from nmt.setup.compare import CompareSpec, LauncherSpec, PlannedRun
from nmt.setup.config import from_dict
from nmt.setup.decoding import decode_tag, decoding, evaluation_name
from nmt.setup.migrations import upgrade_recipe
from nmt.setup.recipe import RunConfig
from nmt.training.run import SUMMARY, read_summary, train
from nmt.training.signals import Interrupted
from nmt.training.tracking import publish_results

# a spec's other decodings as plain data (for a SLURM job to unpickle): each its name
# and its decode.KEY=VALUE and length= entries
Decodings = tuple[tuple[str, tuple[str, ...]], ...]

REQUESTED = "requested.yaml"  # the recipe a compare run was asked for, before resolution
RESOLVED = "recipe.yaml"  # the recipe it was trained with, every default filled in


@dataclass(frozen=True)
class RunResult:
    variant: str
    seed: int
    run_dir: Path
    status: str  # trained | resumed | reused | failed
    error: str | None = None  # one line, for the table; the traceback is in RUN/error.log
    tag: str = ""  # another decoding of the run: its results are SPLIT@TAG (nmt evaluate)


# train keys that keep a run's books, not what it computes: where it logs, and how
# often it saves last.pt between validations
BOOKKEEPING_KEYS = (
    "log_to",
    "tensorboard_dir",
    "mlflow_uri",
    "wandb_dir",
    "experiment",
    "run_name",
    "tags",
    "log_checkpoint",
    "save_every",
)


def without_bookkeeping(recipe: Any) -> Any:
    """A recipe without its books (:data:`BOOKKEEPING_KEYS`) and the plug-ins it
    imports: logging elsewhere or saving more often does not make another run, nor
    does a plug-in that the rest of the recipe does not name (a study metric's), so
    none of them stops reuse."""
    if not isinstance(recipe, dict):
        return recipe
    recipe = {k: v for k, v in recipe.items() if k != "plugins"}
    if not isinstance(recipe.get("train"), dict):
        return recipe
    train = {k: v for k, v in recipe["train"].items() if k not in BOOKKEEPING_KEYS}
    return {**recipe, "train": train}


def check_reusable(run: PlannedRun) -> None:
    """A run directory made for a different recipe is not silently reused or overwritten."""
    path = run.run_dir / REQUESTED
    if not path.is_file():
        return
    try:
        requested = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise NmtError(f"{path}: damaged ({type(e).__name__}); delete it to rebuild it") from None
    if _meaning(upgrade_recipe(requested)) != _planned(run):
        raise NmtError(
            f"{run.run_dir} was trained for a different recipe than the spec now asks for; "
            "move it away or choose another out_dir"
        )
    changed = default_changes(run)
    if changed:
        raise NmtError(
            f"{run.run_dir} was trained with {'; '.join(changed)} (a default has changed "
            "since); name the value in the spec's variant, or move the run away"
        )


def _meaning(recipe: Any) -> Any:
    """What a requested recipe asks for: its config with every default filled in,
    without its books, so that spellings of one recipe (a default named or left out,
    ``data.join={}`` for no joining) reuse one run. A recipe that no longer reads as
    a config (a plug-in gone, a key removed) means itself, as written."""
    with contextlib.suppress(NmtError):  # ConfigError too
        recipe = yaml.safe_load(from_dict(RunConfig, recipe).to_yaml())
    return without_bookkeeping(recipe)


def _planned(run: PlannedRun) -> dict[str, Any]:
    """What the plan asks of a run, as :func:`_meaning` reads a request: its config
    (built from the requested recipe when the spec was read) without its books."""
    return without_bookkeeping(yaml.safe_load(run.cfg.to_yaml()))


def default_changes(run: PlannedRun) -> list[str]:
    """What the run was trained with, where the same request now means something else,
    as ``key old, now new``: a default changed since (hard attention's estimator was
    reinforce). Values the run measured on its data (left None in the plan) and keys
    added since (absent from the run's recipe) are no change."""
    path = run.run_dir / RESOLVED
    if not path.is_file():  # training never started
        return []
    try:
        trained = yaml.safe_load(path.read_text("utf-8"))
        trained = flatten(without_bookkeeping(upgrade_recipe(trained)))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, AttributeError) as e:
        warn(f"{path}: damaged ({type(e).__name__}); its defaults are not checked")
        return []
    planned = flatten(_planned(run))
    return [
        f"{key} {trained[key]!r}, now {value!r}"
        for key, value in sorted(planned.items())
        if key in trained and value is not None and trained[key] != value
    ]


@dataclass(frozen=True)
class Launch:
    """What a study asks its launcher to bring up: the planned runs, the splits each is
    evaluated on, the device, the spec's launcher section and the study's directory,
    whether to wait for the runs (``nmt compare --no-wait``: no), how many to train
    at once on this machine (``--jobs``) and the spec's other decodings."""

    planned: list[PlannedRun]
    splits: tuple[str, ...]
    device: str
    spec: LauncherSpec
    out: Path
    wait: bool = True
    jobs: int = 1
    decodings: Decodings = ()


class Launcher:
    """Where a study's runs train (``launcher.kind``, registered in
    nmt.setup.compare.LAUNCHERS): :meth:`launch` brings up every planned run (trains,
    resumes or reuses it and evaluates its splits, :func:`bring_up`) and returns the
    outcomes in plan order. ``detaches``: whether it can return once the runs are
    submitted (``nmt compare --no-wait``), leaving them to train elsewhere."""

    detaches = False

    def launch(self, job: Launch) -> list[RunResult] | None:
        """The outcomes, or None where the launcher detached (``job.wait`` false)."""
        raise NotImplementedError


def finished_run(run_dir: Path) -> bool:
    """Whether training finished (a readable summary); a damaged summary is rebuilt by
    resuming, which ends at once where the budget is spent."""
    try:
        return read_summary(run_dir) is not None
    except NmtError:
        warn(f"{run_dir / SUMMARY} was damaged; resuming to rebuild it")
        return False


def bring_up(
    run: PlannedRun,
    splits: tuple[str, ...],
    device: str,
    decodings: Decodings = (),
) -> RunResult:
    """Train (or resume, or reuse) one run and make sure every split is evaluated, as
    trained and under each of ``decodings`` (:func:`decode_again`)."""
    finished = finished_run(run.run_dir)
    resume = not finished and (run.run_dir / "last.pt").is_file()
    status = "reused" if finished else "resumed" if resume else "trained"
    console.rule(f"{run.variant} seed {run.seed}: {status} ({run.run_dir})")
    try:
        if not finished:
            run.run_dir.mkdir(parents=True, exist_ok=True)
            write_text(run.run_dir / REQUESTED, yaml.safe_dump(run.recipe, sort_keys=False))
            train(run.cfg, device=device, resume=resume)
        done = read_results(run.run_dir)
        missing = [s for s in splits if s not in done]
        if missing:
            evaluate(run.run_dir, missing, device=device)
        if missing or not finished:
            publish_results(run.run_dir)
    except (Interrupted, KeyboardInterrupt):
        raise
    except Exception as e:  # one broken variant must not stop the study
        return failed(RunResult(run.variant, run.seed, run.run_dir, status), e)
    decode_again(run, splits, decodings, device)
    (run.run_dir / "error.log").unlink(missing_ok=True)  # an earlier try's, now stale
    return RunResult(run.variant, run.seed, run.run_dir, status)


def decode(
    run: PlannedRun | RunResult,
    splits: tuple[str, ...],
    name: str,
    entries: tuple[str, ...],
    device: str,
) -> str:
    """The run's ``splits`` under the spec's decoding ``name`` (its ``entries``), where
    its results.json lacks them (what ``nmt evaluate --set ... --length ...`` keeps as
    SPLIT@TAG); the decoding's tag."""
    overrides, length = decoding(entries)
    tag = decode_tag(overrides, length)
    todo = [s for s in splits if evaluation_name(s, tag) not in read_results(run.run_dir)]
    if todo:
        console.print(f"decoding {run.variant} seed {run.seed} as {name} ({tag})")
        evaluate(run.run_dir, todo, device, overrides, length)
    return tag


def decode_again(
    run: PlannedRun, splits: tuple[str, ...], decodings: Decodings, device: str
) -> None:
    """The tested run under each of the study's other decodings. A decoding that fails
    is left to the study, which tries it again with the others'
    (:func:`evaluate_decodings`) and reports it as that decoding's failure, not the
    run's."""
    for name, entries in decodings:
        try:
            decode(run, splits, name, entries, device)
        except (Interrupted, KeyboardInterrupt):
            raise
        except Exception as e:
            message = " ".join(str(e).split()) or type(e).__name__
            warn(f"{run.variant} seed {run.seed} as {name}: {message} (the study tries again)")


def failed(run: RunResult, error: Exception) -> RunResult:
    """Record a failure: one line for the table, the traceback in RUN/error.log."""
    message = " ".join(str(error).split()) or type(error).__name__
    if run.run_dir.is_dir():
        write_text(run.run_dir / "error.log", traceback.format_exc())
    console.print(f"[red]{run.variant} seed {run.seed} failed:[/red] {message}")
    return RunResult(run.variant, run.seed, run.run_dir, "failed", message)


def done(run: PlannedRun | RunResult, splits: tuple[str, ...], decodings: Decodings = ()) -> bool:
    """Trained and evaluated on every split, and on each of ``decodings`` where they
    are given: nothing left to launch."""
    if not finished_run(run.run_dir):
        return False
    results = read_results(run.run_dir)
    tags = ["", *(decode_tag(*decoding(entries)) for _, entries in decodings)]
    return all(evaluation_name(s, tag) in results for s in splits for tag in tags)


def evaluate_decodings(
    spec: CompareSpec, outcomes: list[RunResult], device: str
) -> list[RunResult]:
    """Every finished run under each of the spec's ``decodings`` (:func:`decode`: reused
    where its launcher decoded it already), as the variants VARIANT@DECODING."""
    out = []
    for name, entries in spec.decodings.items():
        tag = decode_tag(*decoding(entries))
        for o in outcomes:
            if o.status == "failed":
                continue
            result = RunResult(f"{o.variant}@{name}", o.seed, o.run_dir, "reused", tag=tag)
            try:
                decode(o, spec.splits or (), name, entries, device)
                out.append(result)
            except Exception as e:  # reported as a failed run, the others still compared
                out.append(failed(result, e))
    return out


def fail_if_any_failed(outcomes: list[RunResult], out: Path) -> None:
    """After the report of what worked: an error (a non-zero exit) naming the runs that
    failed, so that scripts and CI notice."""
    failures = [r for r in outcomes if r.status == "failed"]
    if failures:
        named = "; ".join(f"{r.variant} seed {r.seed}: {r.error}" for r in failures[:3])
        more = f" and {len(failures) - 3} more" if len(failures) > 3 else ""
        raise NmtError(
            f"{len(failures)} of {len(outcomes)} runs failed ({named}{more}); the report in "
            f"{out} covers the others, each failed run's RUN/error.log has its traceback"
        )
