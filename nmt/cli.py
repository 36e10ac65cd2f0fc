"""The ``nmt`` command line: each command parses its arguments and calls the library."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Optional

import typer
from typer.core import TyperGroup

from nmt.errors import NmtError
from nmt.setup.allocator import start_with_the_chosen_allocator

# click's exceptions as typer raises them: typer 0.26 runs on its own copy of click
# (typer._click), earlier versions on click itself
_clicks = sys.modules[typer.BadParameter.__module__]
# click 8.2 and later: no arguments at all, where the help is shown (earlier: an exit)
_NO_ARGS = getattr(_clicks, "NoArgsIsHelpError", ())


@contextlib.contextmanager
def _usage_in_one_line() -> Iterator[None]:
    """A usage error (an unknown option or command, a missing argument, a value of
    the wrong type or out of range) as one line on stderr naming the command's help,
    and exit code 2; no arguments at all still show the help."""
    try:
        yield
    except _NO_ARGS:
        raise
    except _clicks.ClickException as e:
        where = e.ctx.command_path if getattr(e, "ctx", None) else "nmt"
        typer.echo(f"error: {_one_line(e.format_message())} (see {where} --help)", err=True)
        raise typer.Exit(2) from None


class OneLineUsage(TyperGroup):
    """Typer's command group, with its usage errors in one line as nmt's other errors
    are (Typer draws them as a box of five lines). The group parses its own options
    in ``make_context`` and, in ``invoke``, its commands' and sub-groups'."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        with _usage_in_one_line():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx: Any) -> Any:
        with _usage_in_one_line():
            return super().invoke(ctx)


app = typer.Typer(
    cls=OneLineUsage,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Transformer NMT with pluggable cross-attention and scheduled sampling.",
    epilog="Example: nmt train recipes/toy.yaml && nmt translate runs/toy -i data/toy/test.src"
    "  (every command: nmt COMMAND --help; shell completion: nmt --install-completion)",
)
data_app = typer.Typer(
    no_args_is_help=True,
    help="Corpora: the toy corpus, downloads, preparing a recipe's data.",
    epilog="Example: nmt data toy data/toy && nmt data prepare recipes/toy.yaml",
)
app.add_typer(data_app, name="data")


OUT_OF_MEMORY = (
    "out of memory: an input line, a batch or the model is too large for this machine "
    "(a batch's size: --batch-tokens, train.batch_tokens)"
)


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


def user_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn :class:`NmtError` (and running out of memory) into one line on stderr and
    exit code 2, no traceback; SIGINT and SIGTERM unwind the command (so that its
    atomic writers remove their temp files) and exit 130 and 143."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from nmt.training.signals import Interrupted, Terminated, terminable

        try:
            with terminable():
                return fn(*args, **kwargs)
        except NmtError as e:
            typer.echo(f"error: {_one_line(e)}", err=True)
            raise typer.Exit(2) from None
        except MemoryError:  # e.g. -i /dev/zero: one endless line
            typer.echo(f"error: {OUT_OF_MEMORY}", err=True)
            raise typer.Exit(2) from None
        except Interrupted as e:
            typer.echo(str(e), err=True)
            raise typer.Exit(e.code) from None
        except KeyboardInterrupt:  # partial outputs were removed on the way out
            typer.echo("interrupted (SIGINT); nothing half-written was left", err=True)
            raise typer.Exit(130) from None
        except Terminated:
            typer.echo("terminated (SIGTERM); nothing half-written was left", err=True)
            raise typer.Exit(143) from None

    return wrapper


def _version(show: bool) -> None:
    if show:
        from importlib.metadata import version

        from nmt import DISTRIBUTION

        typer.echo(f"nmt {version(DISTRIBUTION)}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="No progress bars or messages; warnings and errors only."
    ),
) -> None:
    """Transformer NMT with pluggable cross-attention and scheduled sampling."""
    if quiet:
        from nmt.progress import set_quiet

        set_quiet()


DEVICE_HELP = "auto (CUDA if available), cpu, cuda or cuda:N (the N-th visible GPU)."
CHECKPOINT_HELP = "A checkpoint, or a run directory (its best.pt)."
SET_HELP = "Override a recipe value, e.g. --set model.attention.kind=local_m (repeatable)."
PLUGIN_HELP = (
    "Import a module (or .py file) that registers attention kinds, trainers, blocks "
    "first (repeatable; docs/extending.md)."
)


@app.command(
    epilog="Example: nmt train recipes/toy.yaml --set train.max_steps=300  "
    "(data-parallel: nmt train recipes/toy.yaml --nproc 2)"
)
@user_errors
def train(
    recipe: Path = typer.Argument(..., help="YAML recipe (see docs/recipes.md)."),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP),
    resume: bool = typer.Option(False, "--resume", help="Continue from RUN_DIR/last.pt."),
    device: str = typer.Option("auto", help=DEVICE_HELP + " bf16 autocast on CUDA."),
    nproc: int = typer.Option(
        1, min=1, max=64, help="Processes for data-parallel training (runs torchrun)."
    ),
    plugin: list[str] = typer.Option([], "--plugin", help=PLUGIN_HELP),
) -> None:
    """Train a model from a recipe; writes best.pt, last.pt, metrics.jsonl to run_dir."""
    from nmt.setup.recipe import load_recipe

    # a bad recipe fails before any process, and before torch and the trainer load
    cfg = load_recipe(recipe, set_, tuple(plugin))
    from nmt.decoding.evaluate import evaluate
    from nmt.training.run import train as run_training
    from nmt.training.tracking import publish_results

    if nproc > 1 and device.startswith("cuda:"):
        raise NmtError(f"--device {device}: --nproc gives each process its own GPU; use cuda")
    if nproc > 1 and "WORLD_SIZE" not in os.environ:
        from nmt.training.distributed import launch, refuse_missing_gpus

        refuse_missing_gpus(nproc, device)  # once, here, not in every rank's log
        argv = ["train", str(recipe), *[f"--set={x}" for x in set_], f"--device={device}"]
        argv += [f"--plugin={x}" for x in plugin]
        raise typer.Exit(launch(nproc, [*argv, *(["--resume"] if resume else [])]))
    summary = run_training(cfg, device=device, resume=resume)
    if summary is None:  # a data-parallel rank other than 0
        return
    from nmt.progress import console

    console.print(
        f"trained {summary['steps']} steps in {summary['elapsed_s']:.0f} s "
        f"({summary['tokens_per_s']:.0f} target tokens/s, stop: {summary['stop']}, "
        f"peak RSS {summary['peak_rss_mb']:.0f} MB); best step {summary['best_step']}"
    )
    if cfg.data.test:
        evaluate(cfg.run_dir, list(cfg.data.test), device=device)
    publish_results(cfg.run_dir)


@app.command(
    epilog="Example: nmt evaluate runs/toy --split test --split test_long  "
    "(other decoding: nmt evaluate runs/toy --split 'test*3' --set decode.coverage=0.2 "
    "--length oracle; another corpus: nmt evaluate runs/multi30k-de-en --data data/ted "
    "--split 'ted_tst2010~3')"
)
@user_errors
def evaluate(
    run: Path = typer.Argument(..., help="Run directory (uses its best.pt)."),
    split: list[str] = typer.Option(
        [], help="Splits to evaluate (default: the recipe's data.test)."
    ),
    device: str = typer.Option("auto", help=DEVICE_HELP),
    set_: list[str] = typer.Option(
        [], "--set", help="decode.KEY=VALUE instead of the recipe's (kept as SPLIT@TAG)."
    ),
    length: str = typer.Option(
        "model", help="model: the recipe's bounds; oracle: each output as long as its reference."
    ),
    data: Optional[Path] = typer.Option(
        None,
        help="Read the splits from this corpus directory (same languages) instead of "
        "the recipe's data.dir (kept as SPLIT@data=NAME).",
    ),
) -> None:
    """Translate test splits with the recipe's beam settings; scores go to RUN/results.json."""
    from nmt.decoding.evaluate import evaluate as run_evaluate
    from nmt.setup.decoding import length_mode
    from nmt.training.tracking import publish_results

    mode = length_mode(length)
    run_evaluate(run, split or None, device=device, overrides=set_, length=mode, data_dir=data)
    publish_results(run)


@app.command(
    epilog="Example: nmt translate runs/toy -i data/toy/test.src -o hyp.txt --beam 5  "
    "(an ensemble: nmt translate runs/a runs/b -i data/toy/test.src; at the reference's "
    "length: --length oracle --ref data/toy/test.tgt; paragraphs sentence by sentence: "
    "nmt translate runs/multi30k-de-en -i doc.de --split sentences --report lengths.jsonl)"
)
@user_errors
def translate(
    checkpoints: list[Path] = typer.Argument(
        ..., help="A checkpoint or run directory (best.pt); several: their ensemble."
    ),
    input: Optional[Path] = typer.Option(None, "-i", "--input", help="Input file (default stdin)."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Output (default stdout)."),
    beam: Optional[int] = typer.Option(None, help="Beam size (default: the recipe's)."),
    n_best: Optional[int] = typer.Option(None, "--n-best", help="Write 'i ||| hyp ||| score'."),
    alpha: Optional[float] = typer.Option(None, help="Length penalty (Wu et al. 2016)."),
    batch_tokens: Optional[int] = typer.Option(
        None, "--batch-tokens", help="Source tokens x beam per batch (default: the recipe's)."
    ),
    device: str = typer.Option("auto", help=DEVICE_HELP),
    attention_dir: Optional[Path] = typer.Option(
        None, "--attention-dir", help="Save each sentence's cross-attention as DIR/LINE.npz."
    ),
    alignments: Optional[Path] = typer.Option(
        None, "--alignments", help="Write word alignments (Pharaoh i-j) from the attention."
    ),
    sample: bool = typer.Option(False, "--sample", help="Draw each token instead of searching."),
    temperature: Optional[float] = typer.Option(None, help="--sample: temperature (1)."),
    top_k: Optional[int] = typer.Option(None, "--top-k", help="--sample: keep k tokens (0: all)."),
    top_p: Optional[float] = typer.Option(None, "--top-p", help="--sample: nucleus mass (1: all)."),
    seed: Optional[int] = typer.Option(None, help="--sample: random seed (1)."),
    set_: list[str] = typer.Option(
        [], "--set", help="decode.KEY=VALUE (coverage, word_reward, min_len_a, ...)."
    ),
    length: str = typer.Option(
        "model", help="model: the recipe's bounds; oracle: each output as long as its --ref line."
    ),
    ref: Optional[Path] = typer.Option(None, "--ref", help="--length oracle: the references."),
    split: Optional[str] = typer.Option(
        None,
        "--split",
        help="sentences: cut each line into sentences, translate each, join; marks: read "
        "each line whole, its sentences marked (a sentence-group model's).",
    ),
    split_lang: Optional[str] = typer.Option(
        None, "--split-lang", help="--split sentences: the rules' language (default: the run's)."
    ),
    report: Optional[Path] = typer.Option(
        None, "--report", help="Write each line's source, output and predicted length (JSONL)."
    ),
    plugin: list[str] = typer.Option([], "--plugin", help=PLUGIN_HELP),
) -> None:
    """Translate one sentence per line; always exactly one output line per input line.
    Lines whose output is far shorter than the run predicts are named on stderr."""
    from nmt.decoding.translate import Files, Request, sampling_options, translate_file
    from nmt.setup.decoding import length_mode
    from nmt.setup.plugins import import_plugins

    import_plugins(plugin, given=True)
    files = Files(input, output, ref, report, alignments, attention_dir)
    overrides = (*set_, *split_overrides(split, split_lang))
    sampling = sampling_options(sample, temperature, top_k, top_p, seed)
    request = Request(beam, n_best, alpha, batch_tokens, overrides, sampling, length_mode(length))
    translate_file(checkpoints, files, request, device)


def split_overrides(split: str | None, split_lang: str | None) -> list[str]:
    """``--split`` and ``--split-lang`` as the decode keys they set. Without
    ``--split``, the run's own ``decode.split`` (or a ``--set``) decides whether the
    language is used, and the decode section refuses it where it is not."""
    from nmt.setup.decoding import split_mode

    if split is not None and split_mode(split) == "none" and split_lang is not None:
        raise NmtError("--split-lang: only --split sentences and --split marks use it")
    changes = [] if split is None else [f"decode.split={split}"]
    return changes + ([] if split_lang is None else [f"decode.split_lang={split_lang}"])


@app.command(
    epilog='Example: nmt attention runs/toy --src "lo nute miguge" --head mean -o heat.png  '
    "(every layer and head in one grid: --layer all --head all)"
)
@user_errors
def attention(
    checkpoint: Path = typer.Argument(..., help=CHECKPOINT_HELP),
    src: str = typer.Option(..., "--src", help="Source sentence."),
    tgt: Optional[str] = typer.Option(None, "--tgt", help="Forced target (default: decode)."),
    layer: str = typer.Option(
        "-1", help="Decoder layer (negative counts from the last), or 'all': a row each."
    ),
    head: str = typer.Option(
        "mean", help="Head index, 'mean' over heads, or 'all': a column each."
    ),
    output: Path = typer.Option(
        ..., "-o", "--output", help="Figure to write: .png, or .pdf or .svg for a paper."
    ),
    device: str = typer.Option("auto", help=DEVICE_HELP),
) -> None:
    """Draw a cross-attention heatmap, with local attention's centres p_t.

    Writes PNG, or PDF or SVG for a paper (the suffix of -o chooses)."""
    from nmt.decoding.attention import draw_attention

    draw_attention(checkpoint, src, tgt, layer, head, output, device)


@app.command(
    epilog="Example: nmt compare recipes/compare-toy.yaml  "
    "(existing runs: nmt compare --runs runs/a --runs runs/b --out runs/a-vs-b)"
)
@user_errors
def compare(
    spec: Optional[Path] = typer.Argument(
        None, help="Comparison spec (see docs/compare.md); omit with --runs."
    ),
    runs: list[Path] = typer.Option(
        [], "--runs", help="Compare these existing run directories instead (repeatable)."
    ),
    out: Optional[Path] = typer.Option(None, help="Report directory for --runs."),
    split: list[str] = typer.Option([], help="Test splits for --runs (default: the recipe's)."),
    baseline: Optional[str] = typer.Option(None, help="Baseline run name for --runs."),
    device: str = typer.Option("auto", help=DEVICE_HELP),
    set_: list[str] = typer.Option(
        [],
        "--set",
        help="Override a spec key, e.g. --set 'seeds=[1,2,3]' (repeatable); with --runs, "
        "a key of the report, e.g. --set bootstrap=2000.",
    ),
    jobs: int = typer.Option(
        1, min=1, max=64, help="Runs at once: CPU threads split between them, or sharing the GPU."
    ),
    plugin: list[str] = typer.Option([], "--plugin", help=PLUGIN_HELP),
    launcher: Optional[str] = typer.Option(
        None,
        help="local (this machine) or slurm (a job array through submitit, docs/cluster.md); "
        "default: the spec's launcher.kind.",
    ),
    wait: bool = typer.Option(
        True, "--wait/--no-wait", help="slurm: wait for the jobs, or return once submitted."
    ),
) -> None:
    """Train every variant x seed of a spec (or compare --runs) and report the answer.

    Finished runs are reused and interrupted ones resumed; every run is evaluated
    identically; the report gives BLEU/chrF (mean ± std over seeds) with bootstrap
    CIs and p-values, attention statistics and plots."""
    from nmt.compare import compare_runs, run_study

    if (spec is None) == (not runs):
        raise NmtError("give either a SPEC file or --runs DIR (repeated), not both")
    if spec is not None:
        run_study(
            spec,
            device=device,
            overrides=set_,
            jobs=jobs,
            plugins=tuple(plugin),
            launcher=launcher,
            wait=wait,
        )
        return
    if launcher is not None or not wait:
        raise NmtError("--launcher and --no-wait are for a spec's runs; --runs trains none")
    if out is None:
        raise NmtError("--runs needs --out DIR for the report")
    from nmt.setup.plugins import import_plugins

    import_plugins(plugin, given=True)
    compare_runs(runs, out, split, baseline, device=device, overrides=set_)


@app.command(
    epilog="Example: nmt average runs/toy --last 5 -o runs/toy/avg.pt  "
    "(or named checkpoints: nmt average a.pt b.pt -o avg.pt)"
)
@user_errors
def average(
    inputs: list[Path] = typer.Argument(
        ..., help="Checkpoints, or one run directory with --last N (its RUN/step-*.pt)."
    ),
    last: Optional[int] = typer.Option(None, "--last", min=1, help="The run's newest N kept."),
    output: Path = typer.Option(..., "-o", "--output", help="The averaged checkpoint."),
) -> None:
    """Average checkpoints of one model (every floating-point tensor's mean) into one."""
    from nmt.export.averaging import average_into
    from nmt.progress import console

    n = average_into(inputs, last, output)
    console.print(f"{output}: the mean of {n} checkpoint{'s' if n > 1 else ''}")


@app.command(
    epilog="Example: nmt export runs/toy --format hf -o runs/toy-hf  "
    "(then: AutoModelForSeq2SeqLM.from_pretrained('runs/toy-hf'); see docs/commands.md); "
    "nmt export runs/toy --format onnx -o runs/toy-onnx  "
    "(then: python runs/toy-onnx/translate.py runs/toy-onnx < in.txt)"
)
@user_errors
def export(
    checkpoint: Path = typer.Argument(..., help=CHECKPOINT_HELP),
    export_format: str = typer.Option(
        "ctranslate2",
        "--format",
        help="Export format: ctranslate2, hf (Hugging Face) or onnx (with its decoding loop).",
    ),
    output: Path = typer.Option(..., "-o", "--output", help="Directory to create."),
    quantization: str = typer.Option(
        "float32",
        help="CTranslate2's weights as float32, int8, int16, float16, bfloat16 or "
        "int8_float16 (hf: float32).",
    ),
    license: str = typer.Option(
        "unknown", "--license", help="hf: the card's licence id for the Hub (e.g. cc-by-4.0)."
    ),
) -> None:
    """Export a model for CTranslate2, Hugging Face transformers or ONNX Runtime,
    self-contained with its vocabulary.

    CTranslate2 runs global dot attention with the standard decoder only. The hf
    format takes every model: the standard one as transformers' Pegasus class, the
    others with a modelling file loaded with trust_remote_code=True, which carries
    the model code: transformers and torch load it, without nmt. The onnx format
    takes every model but sentence-group ones: two graphs (start, step) and
    translate.py, nmt's search on onnxruntime, without nmt or torch
    (python DIR/translate.py DIR < in.txt)."""
    from nmt.export import export_model
    from nmt.progress import info

    export_model(checkpoint, output, export_format, quantization=quantization, license=license)
    if export_format == "hf":
        kind = json.loads((output / "nmt-export.json").read_text())["class"]
        info(f"{output}: transformers {kind} with its tokenizer and model card")
        return
    if export_format == "onnx":
        info(f"{output}: start.onnx and step.onnx, run by translate.py (onnxruntime)")
        return
    info(f"{output}: CTranslate2 model ({quantization}) with source.spm and target.spm")


@app.command(
    epilog="Example: nmt score hyp.txt --ref data/toy/test.tgt --metrics bleu,chrf  "
    "(from a pipe: nmt translate runs/toy -i data/toy/test.src "
    "| nmt score - --ref data/toy/test.tgt)"
)
@user_errors
def score(
    hyp: Path = typer.Argument(..., help="Hypotheses, one per line; - reads standard input."),
    ref: list[Path] = typer.Option(..., "--ref", help="Reference file (repeatable)."),
    metrics: str = typer.Option("bleu,chrf", help="Comma-separated: bleu, chrf, chrf++, ter."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of text."),
) -> None:
    """Score hypotheses with sacreBLEU and print the scores with their signatures."""
    from nmt.decoding.metrics import score_files

    scores = score_files(hyp, ref, [m.strip() for m in metrics.split(",") if m.strip()])
    if as_json:
        typer.echo(json.dumps([s.__dict__ for s in scores], indent=2))
    else:
        for s in scores:
            typer.echo(f"{s.text}\n  {s.signature}")


@data_app.command("toy", epilog="Example: nmt data toy data/toy --size 12000 --seed 1")
@user_errors
def data_toy(
    out_dir: Path = typer.Argument(
        ..., help="Directory for {train,val,test,test_long}.{src,tgt,align}."
    ),
    size: int = typer.Option(
        12000, help="Training pairs, at most 1,000,000 (dev/test 5% each, test_long 2%)."
    ),
    seed: int = typer.Option(1),
) -> None:
    """Write the synthetic toy corpus with gold word alignments (Pharaoh i-j format)."""
    from nmt.data.toy import write_corpus

    if not 1 <= size <= 1_000_000:
        raise NmtError("--size: must be in 1..1,000,000 training pairs")
    counts = write_corpus(out_dir, size, seed)
    typer.echo(", ".join(f"{k}: {v}" for k, v in counts.items()) + f" pairs in {out_dir}")


@data_app.command(
    "fetch",
    epilog="Example: nmt data fetch multi30k data/multi30k --mirror ../shared/data/multi30k",
)
@user_errors
def data_fetch(
    corpus: str = typer.Argument(..., help="Corpus name: multi30k."),
    out_dir: Path = typer.Argument(..., help="Directory to write the files to."),
    pairs: list[str] = typer.Option(["de-en"], "--pairs", help="Language pairs (repeatable)."),
    mirror: Optional[str] = typer.Option(None, help="A URL prefix or directory to fetch from."),
) -> None:
    """Download a corpus, verify every file's SHA-256, and only then write them."""
    from nmt.data.fetch import fetch
    from nmt.progress import info

    written = fetch(corpus, out_dir, pairs, mirror, log=info)
    typer.echo(f"{len(written)} verified files in {out_dir}")


@data_app.command(
    "import",
    epilog="Example: nmt data import pairs.tsv data/mine --src-lang de --tgt-lang en "
    "--split train  (a saved Hugging Face dataset: nmt data import saved/ data/mine "
    "--src-lang de --tgt-lang en --split validation=val; documents: nmt data import "
    "dev.tsv.gz data/wiki --src-lang zh --tgt-lang en --columns doc,section,,src,tgt)",
)
@user_errors
def data_import(
    source: Path = typer.Argument(
        ...,
        help="A .tsv, .jsonl or source-language .xml file (plain or .gz), or a "
        "save_to_disk directory.",
    ),
    out_dir: Path = typer.Argument(..., help="Directory for {split}.{lang} files."),
    format_: Optional[str] = typer.Option(
        None, "--format", help="tsv, jsonl, hf or xml (default: from SOURCE's name)."
    ),
    columns: str = typer.Option(
        "src,tgt", "--columns", help="tsv: each column's role (src, tgt, doc, section, or none)."
    ),
    header: bool = typer.Option(
        False, "--header", help="tsv: the first line names the columns; skip it."
    ),
    src_lang: str = typer.Option(..., "--src-lang", help="Source language suffix, e.g. de."),
    tgt_lang: str = typer.Option(..., "--tgt-lang", help="Target language suffix, e.g. en."),
    split: list[str] = typer.Option(
        [],
        help="NAME or FROM=TO (repeatable for hf). Default: a file's name up to its "
        "first dot; every split of a dataset under its own name.",
    ),
    src_field: Optional[str] = typer.Option(
        None, help="JSON field of the source (default: translation.SRC, else SRC)."
    ),
    tgt_field: Optional[str] = typer.Option(None, help="JSON field of the target."),
    skip_empty: bool = typer.Option(
        False, "--skip-empty", help="Leave out pairs with an empty side (else an error)."
    ),
    force: bool = typer.Option(False, "--force", help="Replace files already in OUT_DIR."),
) -> None:
    """Write a corpus directory from TSV, JSON lines, a saved Hugging Face dataset or
    IWSLT/WMT XML, with the document ids where the source has them.

    Every segment must be one line; a line break inside one, an empty side or a
    malformed record is an error naming its file and line, and nothing is written."""
    from nmt.data.importing import ImportOptions, Sides, import_corpus, tsv_columns
    from nmt.progress import counted

    sides = Sides(src_lang, tgt_lang, src_field, tgt_field)
    options = ImportOptions(
        tuple(split or ()), skip_empty, force, True, tsv_columns(columns), header
    )
    counts = import_corpus(source, out_dir, format_, sides, options)
    typer.echo(
        ", ".join(
            f"{s}: {counted(c['pairs'], 'pair')}"
            + (f" ({c['empty']:,} with an empty side left out)" if c["empty"] else "")
            for s, c in counts.items()
        )
        + f" in {out_dir}"
    )


@data_app.command(
    "align",
    epilog="Example: nmt data align data/multi30k --src de --tgt en  "
    "(then train with --set 'train.alignment={}')",
)
@user_errors
def data_align(
    directory: Path = typer.Argument(..., help="Directory of {split}.{lang}[.gz] files."),
    src: str = typer.Option(..., "--src", help="Source language suffix, e.g. de."),
    tgt: str = typer.Option(..., "--tgt", help="Target language suffix, e.g. en."),
    split: list[str] = typer.Option([], help="Splits to align (default: every one)."),
) -> None:
    """Word-align a corpus with eflomal into {split}.align (needs the align extra).

    Pharaoh i-j links, both directions symmetrised (grow-diag-final-and)."""
    from nmt.data.align import align_corpus
    from nmt.data.corpus import n_lines
    from nmt.progress import info

    counts = align_corpus(directory, src, tgt, split or None, log=info)
    typer.echo(", ".join(f"{k}.align: {n_lines(v)}" for k, v in counts.items()))


@data_app.command(
    "prepare",
    epilog="Example: nmt data prepare recipes/multi30k-de-en.yaml "
    "--set data.dir=../shared/data/multi30k",
)
@user_errors
def data_prepare(
    recipe: Path = typer.Argument(..., help="YAML recipe (its data section is used)."),
    set_: list[str] = typer.Option([], "--set", help=SET_HELP),
) -> None:
    """Train the recipe's vocabulary and encode its training data into the cache.

    The cache (data.cache_dir) is memory-mapped by every later run with the same
    data."""
    from nmt.data.pipeline import prepare
    from nmt.progress import info
    from nmt.setup.recipe import load_recipe

    meta = prepare(load_recipe(recipe, set_).data, log=info)
    typer.echo(
        f"{meta['pairs']:,} training pairs of {meta['lines']:,} (dropped {meta['empty']:,} "
        f"empty, {meta['long']:,} over-long), {meta['bytes'] / 2**20:,.1f} MiB in {meta['entry']}"
    )


# oneDNN compiles a matrix kernel for each shape it meets and by default keeps 1,024 of
# them: under bf16 on a CPU every batch shape of training adds one, and the cache held
# much of a run's memory at no gain in rate (docs/benchmarks.md, "Where bf16's memory
# goes"). oneDNN reads the variable once, at the process's first product, so it is set
# at the command's start (the processes it starts inherit it), unless the user set it.
ONEDNN_CACHE = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "16")


def main() -> None:
    os.environ.setdefault(*ONEDNN_CACHE)
    try:
        start_with_the_chosen_allocator()  # TCMalloc where installed: nmt/setup/allocator.py
    except NmtError as e:
        typer.echo(f"error: {_one_line(e)}", err=True)
        sys.exit(2)
    app(prog_name="nmt")


if __name__ == "__main__":
    sys.exit(main())
