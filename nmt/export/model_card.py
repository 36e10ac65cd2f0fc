"""The model card (``README.md``) of a Hugging Face export: what was trained on
what, how it scored, how to run it so that it translates as ``nmt translate`` does,
and where it cannot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from nmt.errors import NmtError
from nmt.export.ctranslate2 import published_name, published_recipe
from nmt.io.files import read_json
from nmt.model.load import Loaded


def run_scores(checkpoint: Path) -> tuple[dict[str, dict[str, Any]], str]:
    """The run's own evaluations of best.pt (results.json, the recipe's decoding), by
    split, and a sentence saying which weights they are of."""
    run = checkpoint if checkpoint.is_dir() else checkpoint.parent
    exported = "best.pt" if checkpoint.is_dir() else checkpoint.name
    path = run / "results.json"
    if exported != "best.pt" or not path.is_file():
        return {}, f"No scores: the run's results.json holds best.pt's, and this is {exported}."
    try:
        results = read_json(path)
    except NmtError:  # damaged: the card goes without scores
        return {}, f"No scores: {path} could not be read."
    scores = {
        split: r
        for split, r in results.items()
        if "@" not in split and isinstance(r, dict) and isinstance(r.get("bleu"), (int, float))
    }
    return scores, f"From `nmt evaluate` of best.pt ({path.name}; sacreBLEU {_signature(results)})."


def front_matter(loaded: Loaded, scores: dict[str, dict[str, Any]], license: str) -> str:
    """The card's metadata as the Hub reads it (huggingface_hub's ModelCardData):
    languages, licence, tags and the scores as a model-index."""
    from huggingface_hub import EvalResult, ModelCardData

    d, kind = loaded.cfg.data, loaded.cfg.model.attention.kind
    dataset = Path(d.dir).name
    results = [
        EvalResult(
            task_type="translation",
            dataset_type=dataset,
            dataset_name=dataset,
            dataset_split=split,
            metric_type=metric,
            metric_value=round(float(r[metric]), 2),
        )
        for split, r in scores.items()
        for metric in ("bleu", "chrf")
        if isinstance(r.get(metric), (int, float))
    ]
    card = ModelCardData(
        language=[d.src_lang, d.tgt_lang],
        license=license,
        library_name="transformers",
        pipeline_tag="translation",
        tags=["translation", "nmt-attention", f"attention-{kind}"],
        model_name=f"nmt {kind} {d.src_lang}-{d.tgt_lang}",
        eval_results=results or None,
    )
    return card.to_yaml()


def _signature(results: dict[str, Any]) -> str:
    for r in results.values():
        if isinstance(r, dict) and "bleu_signature" in r:
            return r["bleu_signature"]
    return "signature not recorded"


def model_card(loaded: Loaded, checkpoint: Path, manifest: dict[str, Any]) -> str:
    """The card's markdown, with the front matter the Hub reads."""
    results, source = run_scores(checkpoint)
    lines = [
        "---",
        front_matter(loaded, results, manifest["license"]).strip(),
        "---",
        "",
        *card_about(loaded, checkpoint, manifest),
        "## Scores",
        "",
        source,
        "",
        *score_table(results),
        "",
        *card_use(manifest),
        "## Recipe",
        "",
        "```yaml",
        yaml.safe_dump(
            published_recipe(loaded.cfg.to_dict()), sort_keys=False, allow_unicode=True
        ).strip(),
        "```",
        "",
    ]
    return "\n".join(lines)


def card_about(loaded: Loaded, checkpoint: Path, manifest: dict[str, Any]) -> list[str]:
    """The card's title, what the model is and where it came from, and its data."""
    d = loaded.cfg.data
    remote = manifest["remote_code"]
    how = (
        f"`{manifest['class']}`, with this directory's `modeling_nmt.py`, which builds "
        f"nmt's own model from the copy of nmt {manifest['nmt_version']}'s model code in "
        "`nmt_code.py` (transformers and torch load it; nmt itself, "
        "`pip install nmt-attention`, is needed only to train): "
        f"{manifest['why_remote_code']}"
        if remote
        else f"transformers' own `{manifest['class']}`, the same function as nmt's model "
        "(its residual dimensions reordered)"
    )
    return [
        f"# {d.src_lang}→{d.tgt_lang} translation, {loaded.cfg.model.attention.kind} "
        "cross-attention",
        "",
        f"Trained with [nmt](https://pypi.org/project/nmt-attention/) and exported by "
        f"`nmt export --format hf` (nmt {manifest['nmt_version']}, transformers "
        f"{manifest['transformers_version']}) from `{published_name(checkpoint)}`. "
        f"The model is {how}. Licence: `{manifest['license']}` (the exporter's "
        "`--license`; a model's terms follow its training data's).",
        "",
        "## Data",
        "",
        f"`{Path(d.dir).name}`: trained on `{d.train}`, validated on `{d.dev}`, tested on "
        f"{', '.join(f'`{t}`' for t in d.test) or 'nothing'}; one SentencePiece "
        f"{d.vocab.type} vocabulary of {len(loaded.vocabs.tgt)} pieces for both languages.",
        "",
    ]


def score_table(results: dict[str, dict[str, Any]]) -> list[str]:
    """The run's test scores as a markdown table (none: no lines)."""
    rows = [
        f"| {split} | {r.get('sentences', '')} | {r.get('beam', '')} | {r['bleu']:.2f} | "
        f"{r.get('chrf', float('nan')):.2f} |"
        for split, r in results.items()
    ]
    if not rows:
        return []
    return ["| split | sentences | beam | BLEU | chrF |", "| --- | --- | --- | --- | --- |", *rows]


def card_use(manifest: dict[str, Any]) -> list[str]:
    """How to load and run the export, and where it differs from ``nmt translate``."""
    load = ", trust_remote_code=True" if manifest["remote_code"] else ""
    limit = manifest["max_new_tokens"]
    return [
        "## Use",
        "",
        "```python",
        "from transformers import AutoModelForSeq2SeqLM, AutoTokenizer",
        f'tokenizer = AutoTokenizer.from_pretrained("DIR"{load})',
        f'model = AutoModelForSeq2SeqLM.from_pretrained("DIR"{load})',
        'batch = tokenizer(["a sentence"], return_tensors="pt")',
        "out = model.generate(**batch)  # the recipe's beam",
        "print(tokenizer.batch_decode(out, skip_special_tokens=True))",
        "```",
        "",
        "To get exactly what `nmt translate` gives with `--beam 1`, translate one "
        "sentence at a time with `num_beams=1` and nmt's length limit, "
        f"`max_new_tokens = min(int({limit['a']} * n + {limit['b']}), {limit['cap']})` "
        "for a source of n ids (`len(batch.input_ids[0])`, `</s>` included).",
        "",
        "## Limits",
        "",
        "- Beam search: transformers divides a hypothesis's log-probability by "
        "length ** `length_penalty`, nmt by GNMT's ((5 + length) / 6) ** alpha, so "
        "beam outputs can differ from nmt's; greedy outputs do not.",
        "- An output's `<unk>`: SentencePiece writes ` ⁇ `, `skip_special_tokens` drops it.",
        "- Not expressible in `generate`: nmt's `decode.coverage`, `decode.word_reward` "
        "and `decode.min_len_a`; the length limit is one number per call.",
        *(
            ["- `generate` runs without a cache: each step reads the whole prefix again."]
            if manifest["remote_code"]
            else []
        ),
        "",
    ]
