"""Run a comparison end to end: bring every run up, analyse it, report and plot."""

from __future__ import annotations

import dataclasses
import time
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import torch
import yaml

from nmt.compare.aggregate import (
    check_one_test_set,
    contrast_rows,
    machine_notes,
    sentence_pairs,
    summarise,
)
from nmt.compare.analysis import (
    RunAnalysis,
    Wanted,
    analyse_run,
    heatmap_lines,
    read_gold,
    recipe_of,
)
from nmt.compare.ensembles import ensemble_rows
from nmt.compare.html import heatmap, write_html
from nmt.compare.plots import plot_attention_grid, plot_dev_curves, plot_length_buckets
from nmt.compare.report import Report, print_tables, write_csv, write_json, write_markdown
from nmt.compare.rows import Row
from nmt.data.corpus import n_lines
from nmt.data.pipeline import check_files, load_split
from nmt.decoding.evaluate import evaluate, read_results
from nmt.errors import NmtError
from nmt.inspection.diagnostics import caption_starts, ratio
from nmt.io.checkpoint import no_best
from nmt.io.files import write_text
from nmt.io.rundir import is_run, owned
from nmt.launch.runs import (
    Launch,
    RunResult,
    check_reusable,
    evaluate_decodings,
    fail_if_any_failed,
    failed,
)
from nmt.progress import clock, console, counted, eta, log_line, progress_bar, warn
from nmt.setup.compare import LAUNCHERS, CompareSpec, PlannedRun, load_spec, with_spec_overrides
from nmt.setup.config import from_dict, read_yaml
from nmt.setup.device import resolve_device
from nmt.setup.migrations import RESULTS_VERSION
from nmt.setup.recipe import RunConfig


def run_study(
    spec_path: str | Path,
    device: str = "auto",
    overrides: list[str] | None = None,
    jobs: int = 1,
    plugins: tuple[str, ...] = (),
    launcher: str | None = None,
    wait: bool = True,
) -> Path:
    """``nmt compare SPEC``: train or reuse every variant × seed, then report.
    ``launcher`` (default: the spec's ``launcher.kind``): ``local``, or ``slurm`` (a
    job array; with ``wait=False`` it returns once submitted)."""
    overrides = [*(overrides or []), *([f"launcher.kind={launcher}"] if launcher else [])]
    spec, planned = load_spec(spec_path, overrides, plugins)
    launcher = LAUNCHERS.get(spec.launcher.kind)()
    if not wait and not launcher.detaches:
        raise NmtError(
            f"--no-wait: the {spec.launcher.kind} launcher trains the runs here; only one "
            "that submits them elsewhere (--launcher slurm) returns before they end"
        )
    for run in planned:
        check_reusable(run)
    check_not_a_run(Path(spec.out_dir), "out_dir")
    check_data(spec, planned, where=f"{spec_path}: ")
    out = Path(spec.out_dir)
    with owned(out, "out_dir"):  # a second study here would race for runs and report
        raw = with_spec_overrides(read_yaml(spec_path), overrides or [])
        write_text(out / "spec.yaml", yaml.safe_dump(raw, sort_keys=False))
        decodings = tuple(spec.decodings.items())  # decoded as each run is tested
        job = Launch(planned, spec.splits or (), device, spec.launcher, out, wait, jobs, decodings)
        outcomes = launcher.launch(job)
        if outcomes is None:  # submitted; a later nmt compare reports
            return out
        outcomes += evaluate_decodings(spec, outcomes, device)
        report(spec, outcomes, out, device, title=f"Comparison: {Path(spec_path).name}")
    fail_if_any_failed(outcomes, out)
    return out


def check_not_a_run(out: Path, key: str) -> None:
    """A report written into a run directory would replace the run's own
    results.json (its scores) with the report's."""
    if is_run(out):
        raise NmtError(
            f"{key} {out}: a run directory; the report's results.json would replace the "
            "run's scores; choose another"
        )


def check_data(spec: CompareSpec, planned: list[PlannedRun], where: str = "") -> None:
    """Before any run trains, every data section's files, the spec's test splits in
    each (and their gold alignments), and the heatmap lines in the first split: a
    split that no recipe names would otherwise fail every run after it trained, a
    line past the end would draw nothing. ``where``: what the spec's key errors
    start with (its file, as the spec's other errors do)."""
    for data in dict.fromkeys(run.cfg.data for run in planned):
        check_files(data)
        for i, split in enumerate(spec.splits or ()):
            try:
                lines = len(load_split(data, split)[0])
                read_gold(data, split, lines)
            except NmtError as e:
                raise NmtError(f"{where}splits: {e}") from None
            if i == 0 and (past := [n for n in spec.heatmaps if n >= lines]):
                raise NmtError(
                    f"{where}heatmaps: line {past[0]} is past the end of {split} "
                    f"({n_lines(lines)}, numbered from 0)"
                )


# the spec keys that say how a report compares, which --runs takes with --set (the
# others say what to train, or have options of their own: --out, --split, --baseline)
REPORT_KEYS = (
    "bootstrap", "contrasts", "figures", "heatmaps", "length_buckets", "scores", "significance",
)  # fmt: skip


def compare_runs(
    run_dirs: list[Path],
    out_dir: Path,
    splits: list[str],
    baseline: str | None,
    device: str = "auto",
    overrides: list[str] | None = None,
) -> Path:
    """``nmt compare --runs``: compare runs that already exist (each its own variant,
    named after its directory); splits not evaluated yet are evaluated first.
    ``overrides`` set the report's spec keys (:data:`REPORT_KEYS`), e.g.
    ``bootstrap=2000`` or ``contrasts=[[a, b]]`` with the runs' names."""
    names = [d.name for d in run_dirs]
    if len(set(names)) < len(names):  # e.g. .../global/seed1 and .../local_m/seed1
        names = [f"{d.parent.name}-{d.name}" for d in run_dirs]
    if len(set(names)) < len(names):
        names = [f"run{i}-{d.name}" for i, d in enumerate(run_dirs, 1)]
    for i, d in enumerate(run_dirs):
        if not (d / "best.pt").is_file() and not (d / "recipe.yaml").is_file():
            raise NmtError(f"--runs {no_best(d)}")
        if d.resolve() in {e.resolve() for e in run_dirs[:i]}:
            raise NmtError(f"--runs {d}: named twice")
    check_not_a_run(out_dir, "--out")
    configs = [recipe_of(d) for d in run_dirs]
    if not splits:
        splits = list(configs[0].data.test)
        if not splits:
            raise NmtError(f"{run_dirs[0]}: the recipe has no data.test; name --split")
    missing = [[s for s in splits if s not in read_results(d)] for d in run_dirs]
    for d, to_do in zip(run_dirs, missing):  # a pruned run is reported from its translations
        if to_do and not (d / "best.pt").is_file():
            raise NmtError(f"--runs {d}: no best.pt to translate {', '.join(to_do)} with")
    for cfg, to_do in zip(configs, missing):  # before any evaluation: a split a corpus lacks
        for split in to_do:
            try:
                load_split(cfg.data, split)
            except NmtError as e:
                raise NmtError(f"--split {split}: {e}") from None
    if baseline is not None and baseline not in names:
        raise NmtError(f"--baseline {baseline!r}: not one of {', '.join(names)}")
    warn_of_other_search(configs)
    spec = runs_spec(names, out_dir, splits, baseline, overrides or [])
    outcomes = []
    with owned(out_dir, "--out"):
        for name, d, cfg, to_do in zip(names, run_dirs, configs, missing):
            seed = cfg.train.seed
            try:
                if to_do:
                    evaluate(d, to_do, device=device)
                outcomes.append(RunResult(name, seed, d, "reused"))
            except Exception as e:  # a broken run is reported, the others still compared
                outcomes.append(failed(RunResult(name, seed, d, "reused"), e))
        report(spec, outcomes, out_dir, device, title="Comparison of existing runs")
    fail_if_any_failed(outcomes, out_dir)
    return out_dir


def runs_spec(
    names: list[str], out_dir: Path, splits: list[str], baseline: str | None, overrides: list[str]
) -> CompareSpec:
    """The spec of a comparison of existing runs: one variant per run, the report's
    keys as ``--set`` gives them; a key that says what to train is refused."""
    for text in overrides:
        key = text.partition("=")[0].strip().split(".")[0]
        if key not in REPORT_KEYS:
            raise NmtError(
                f"--set {text}: --runs takes the report's keys ({', '.join(REPORT_KEYS)}); "
                f"{key} says what a spec trains"
            )
    raw = {"base": "", "out_dir": str(out_dir), "variants": {n: [] for n in names}}
    raw = with_spec_overrides({**raw, "baseline": baseline, "splits": splits}, overrides)
    try:
        return from_dict(CompareSpec, raw)
    except NmtError as e:
        raise NmtError(f"--set: {e}") from None


def warn_of_other_search(configs: list[RunConfig]) -> None:
    """Runs brought together with ``--runs`` may decode differently (a beam of 1 and
    one of 5): their difference then measures the search too, so say which keys
    differ. Keys that change only speed are not named."""
    decodes = [dataclasses.asdict(cfg.decode) for cfg in configs]
    keys = sorted({k for dec in decodes for k in dec} - {"batch_tokens", "n_best"})
    differ = [k for k in keys if len({repr(dec.get(k)) for dec in decodes}) > 1]
    if differ:
        named = ", ".join(f"decode.{k}" for k in differ)
        warn(f"the runs translate with different {named}: the comparison measures that too")


def report(
    spec: CompareSpec, outcomes: list[RunResult], out: Path, device: str, title: str
) -> None:
    """Analyse the finished runs; write the tables, figures and files into ``out``."""
    splits = spec.splits or ()
    dev = resolve_device(device)
    runs, failures = analyse_all(spec, outcomes, dev)
    check_one_test_set(runs, splits)
    baseline = spec.baseline_name
    rows = summarise(runs, splits, baseline, spec.bootstrap, spec.length_buckets, spec.significance)
    contrasts = contrast_rows(runs, splits, spec.contrasts, spec.bootstrap, spec.significance)
    figures = plot_all(out, runs, rows, splits, spec.heatmaps, spec.figures)
    ensembles = ensemble_rows(runs, splits, out, dev) if spec.ensemble else []
    print_tables(rows, splits, failures, contrasts)
    for e in ensembles:
        console.print(
            f"{e.split}: {e.variant}, its {e.seeds} seeds as one ensemble: BLEU "
            f"{e.bleu:.2f} (the seeds' mean {e.seeds_bleu:.2f}, {e.gain:+.2f})"
        )
    notes = machine_notes(runs) + pruned_notes(runs) + tracker_notes(runs)
    report = Report(
        title, splits, rows, failures, baseline, spec.bootstrap, figures, spec.significance,
        ensembles, contrasts, notes,
    )  # fmt: skip
    write_markdown(out / "report.md", report)
    for note in notes:
        warn(note)
    maps = html_maps(runs, splits)
    # the page draws attention itself (hoverable canvases); it embeds the other plots
    grids = ATTENTION_FIGURE.format(split="*", line="*")
    plots = {k: [f for f in names if not fnmatch(f, grids)] for k, names in figures.items()}
    write_html(out / "report.html", title, splits, rows, maps, notes, plots)
    write_csv(out / "results.csv", rows)
    payload: dict[str, Any] = {
        "version": RESULTS_VERSION,
        "baseline": baseline,
        "splits": splits,
        "bootstrap_samples": spec.bootstrap,
        "significance": dataclasses.asdict(spec.significance),
        "rows": [r.record() for r in rows],
        "contrasts": [c.record() for c in contrasts],
        "ensembles": [e.record() for e in ensembles],
        "notes": notes,
        "runs": [per_run(r) for rs in runs.values() for r in rs],
        "failed": [
            {"variant": f.variant, "seed": f.seed, "run_dir": f.run_dir, "error": f.error}
            for f in failures
        ],
    }
    write_json(out / "results.json", payload)
    console.print(f"report: {out / 'report.md'}")


def analyse_all(
    spec: CompareSpec, outcomes: list[RunResult], device: torch.device
) -> tuple[dict[str, list[RunAnalysis]], list[RunResult]]:
    """Every finished run's analysis by variant, and the runs that failed (to train,
    or now to be analysed)."""
    wanted = Wanted(spec.splits or (), spec.heatmaps, spec.scores)
    runs: dict[str, list[RunAnalysis]] = {name: [] for name in spec.names}
    failures = [o for o in outcomes if o.status == "failed"]
    read: dict[Path, dict[str, dict[str, float]]] = {}  # a run's attention, for its decodings
    # the runs themselves before their other decodings (evaluate_decodings)
    todo = [o for o in outcomes if o.status != "failed"]
    start = time.perf_counter()
    with progress_bar() as bar:  # a log has the lines
        task = bar.add_task("analysis", total=len(todo), rate=0.0, unit="runs/min", info="")
        for k, o in enumerate(todo):
            elapsed = time.perf_counter() - start
            bar.update(task, info=f"{o.variant} seed {o.seed}")
            log_line(
                f"analysing {o.variant} seed {o.seed} ({k + 1} of {len(todo)}, elapsed "
                f"{clock(elapsed)}, ETA {eta(k, len(todo), elapsed)})"
            )
            try:
                analysis = analyse_run(
                    o.variant, o.seed, o.run_dir, wanted, device, o.tag, read.get(o.run_dir)
                )
            except Exception as e:
                failures.append(failed(o, e))
                continue
            finally:
                minutes = (time.perf_counter() - start) / 60
                bar.update(task, completed=k + 1, rate=(k + 1) / max(minutes, 1e-9))
            runs[o.variant].append(analysis)
            if not o.tag:
                read[o.run_dir] = {split: p.attention for split, p in analysis.splits.items()}
    log_line(f"analysed {counted(len(todo), 'run')} in {clock(time.perf_counter() - start)}")
    return runs, failures


def tracker_notes(runs: dict[str, list[RunAnalysis]]) -> list[str]:
    """Say which runs' trackers (train.log_to) failed while they trained: each run
    warned in its own log only, and the tracker holds fewer runs than the study."""
    failed = [
        f"{r.run_dir.name if r.run_dir.name.startswith('seed') else r.run_dir}"
        f" of {r.variant}: {name} ({why})"
        for rs in runs.values()
        for r in rs
        for name, why in r.train.get("tracker_failures", {}).items()
    ]
    if not failed:
        return []
    return [
        f"train.log_to failed in {len(failed)} run(s), whose figures are missing from that "
        f"tracker (metrics.jsonl has them): {'; '.join(failed)}"
    ]


def pruned_notes(runs: dict[str, list[RunAnalysis]]) -> list[str]:
    """Say when runs were analysed without their checkpoints (their attention figures
    are missing, not zero)."""
    every = [r for rs in runs.values() for r in rs]
    pruned = [r for r in every if r.params is None]
    if not pruned:
        return []
    return [
        f"{len(pruned)} of {len(every)} runs had no best.pt and were analysed from their "
        "translations alone: their attention figures (entropy, peak and centre distances, "
        "AER, dropped, backward, each caption's covered share) are left out"
    ]


def html_maps(
    runs: dict[str, list[RunAnalysis]], splits: tuple[str, ...]
) -> dict[str, dict[int, dict[str, Any]]]:
    """Per split and drawn line, each variant's (first seed's) heatmap figures, with
    the captions' starts on a joined split."""
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for split in splits:
        for variant, rs in runs.items():
            if not rs:
                continue
            part = rs[0].splits[split]
            for line, amap in part.maps.items():
                starts = caption_starts(amap, part.caption_words.get(line, [0]))
                out.setdefault(split, {}).setdefault(line, {})[variant] = heatmap(amap, starts)
    return out


def per_run(r: RunAnalysis) -> dict[str, Any]:
    return {
        "variant": r.variant,
        "seed": r.seed,
        "run_dir": r.run_dir,
        "params": r.params,
        "train": r.train,
        "dev_curve": r.curve,
        "splits": {
            split: {
                "bleu": a.bleu,
                "chrf": a.chrf,
                "sentences_per_s": a.sentences_per_s,
                **a.attention,
                **{key: ratio(pairs) for key, pairs in sentence_pairs(a).items()},
            }
            for split, a in r.splits.items()
        },
    }


# the PNGs a report draws, by their names' patterns
LENGTH_FIGURE = "bleu_by_length_{split}.png"
CURVES_FIGURE = "dev_curves.png"
ATTENTION_FIGURE = "attention_{split}_line{line}.png"


def plot_all(
    out: Path,
    runs: dict[str, list[RunAnalysis]],
    rows: list[Row],
    splits: tuple[str, ...],
    lines: tuple[int, ...],
    draw: bool,
) -> dict[str, list[str]]:
    """Write the PNGs (none where ``draw`` is false: the spec's ``figures``) and delete
    those that an earlier report of this study drew and this one does not show (other
    heatmap lines or splits), so that the folder holds what report.md shows; returns
    their file names by split ("_all" for the rest)."""
    figures = draw_all(out, runs, rows, splits, lines) if draw and rows else {"_all": []}
    shown = {name for names in figures.values() for name in names}
    patterns = (
        LENGTH_FIGURE.format(split="*"),
        CURVES_FIGURE,
        ATTENTION_FIGURE.format(split="*", line="*"),
    )
    for pattern in patterns:
        for path in out.glob(pattern):
            if path.name not in shown:
                path.unlink()
    return figures


def draw_all(
    out: Path,
    runs: dict[str, list[RunAnalysis]],
    rows: list[Row],
    splits: tuple[str, ...],
    lines: tuple[int, ...],
) -> dict[str, list[str]]:
    """Draw every figure of the report (:func:`plot_all`)."""
    figures: dict[str, list[str]] = {"_all": []}
    for split in splits:
        name = LENGTH_FIGURE.format(split=split)
        plot_length_buckets(out / name, split, [r for r in rows if r.split == split])
        figures[split] = [name]
    plot_dev_curves(out / CURVES_FIGURE, runs)
    figures["_all"].append(CURVES_FIGURE)
    firsts = {name: rs[0] for name, rs in runs.items() if rs}
    for n, split in enumerate(splits):
        for line in heatmap_lines(n, split, lines):
            parts = {v: r.splits[split] for v, r in firsts.items()}
            maps = {v: p.maps[line] for v, p in parts.items() if line in p.maps}
            starts = {
                v: caption_starts(maps[v], parts[v].caption_words[line])
                for v in maps
                if line in parts[v].caption_words
            }
            if maps:
                name = ATTENTION_FIGURE.format(split=split, line=line)
                title = f"{split} line {line}: cross-attention"
                plot_attention_grid(out / name, maps, title, starts)
                figures["_all"].append(name)
    return figures
