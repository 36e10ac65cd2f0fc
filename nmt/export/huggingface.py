"""``nmt export --format hf``: a directory that Hugging Face ``transformers`` loads
with ``AutoModelForSeq2SeqLM`` and ``AutoTokenizer`` (the ``hf`` extra).

A model that a stock class expresses becomes that class: nmt's standard model
(global dot attention, sinusoidal positions, pre-norm layers with a final norm
on each side, one shared vocabulary) is Pegasus's architecture (Zhang et al.
2020), whose layers are pre-norm too (Marian's classes are post-norm). Pegasus
lays a position vector out as [sin | cos] halves where nmt interleaves them
(Vaswani et al. 2017), so every vector of the residual stream is exported in
that order: the embeddings' columns, the norms, the inputs of the projections
that read the stream and the outputs of those that write to it. Nothing else
moves, so the exported model computes the same function.

Every other model (local_m, local_p, local_s, hard, sparsemax, the other scores,
positions and decoders) is exported with a modelling file,
:mod:`nmt.export.modeling_nmt`, loaded with ``trust_remote_code=True``: it runs nmt's
own modules, a copy of which the export carries (``nmt_code.py``), so that it loads
without nmt.

The tokenizer is the run's SentencePiece model converted to a ``tokenizers``
Unigram (or BPE) model with SentencePiece's own normaliser, so that it gives the
ids nmt gives, ``</s>`` appended to the source as in training.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from nmt import __version__, install_hint
from nmt.data.vocab import BOS, EOS, PAD, UNK, Vocab
from nmt.errors import NmtError
from nmt.export.ctranslate2 import (
    inexpressible,
    length_limit,
    plugin_code,
    published_name,
    published_recipe,
    refuse_occupied,
    write_directory,
)
from nmt.export.model_card import model_card
from nmt.export.vendor import vendored_code
from nmt.io.files import write_text
from nmt.model.load import Loaded, load_model
from nmt.model.seq2seq import Transformer


def stock_obstacle(loaded: Loaded) -> str | None:
    """Why no stock ``transformers`` class expresses this model, or None (Pegasus)."""
    if (why := inexpressible(loaded, "Pegasus")) is not None:
        return why
    if not loaded.cfg.model.tie_embeddings:
        return "model.tie_embeddings is false; Pegasus ties its output layer"
    return None


def residual_order(d_model: int) -> Tensor:
    """Pegasus's residual dimension h holds nmt's dimension order[h]: nmt's
    interleaved sin/cos pairs (0, 1), (2, 3), … as Pegasus's halves."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def pegasus_weights(model: Transformer) -> dict[str, Tensor]:
    """``model``'s weights under PegasusForConditionalGeneration's names, the
    residual stream in Pegasus's order."""
    order = residual_order(model.cfg.d_model)
    out: dict[str, Tensor] = {}

    def reads(name: str, layer: nn.Linear) -> None:  # input from the stream
        out[f"{name}.weight"] = layer.weight[:, order]
        out[f"{name}.bias"] = layer.bias

    def writes(name: str, layer: nn.Linear) -> None:  # output to the stream
        out[f"{name}.weight"] = layer.weight[order]
        out[f"{name}.bias"] = layer.bias[order]

    def norm(name: str, layer: nn.LayerNorm) -> None:
        out[f"{name}.weight"], out[f"{name}.bias"] = layer.weight[order], layer.bias[order]

    def ffn(name: str, layer: nn.Module) -> None:
        norm(f"{name}.final_layer_norm", layer.ffn_norm)
        reads(f"{name}.fc1", layer.ffn[0])  # FeedForward: Linear, ReLU, Dropout, Linear
        out[f"{name}.fc2.weight"] = layer.ffn[3].weight[order]
        out[f"{name}.fc2.bias"] = layer.ffn[3].bias[order]

    def self_attention(name: str, layer: nn.Module) -> None:
        qkv = layer.self_attn.qkv
        for part, weight, bias in zip("qkv", qkv.weight.chunk(3), qkv.bias.chunk(3)):
            out[f"{name}.self_attn.{part}_proj.weight"] = weight[:, order]
            out[f"{name}.self_attn.{part}_proj.bias"] = bias
        writes(f"{name}.self_attn.out_proj", layer.self_attn.out_proj)
        norm(f"{name}.self_attn_layer_norm", layer.self_norm)

    table = model.src_embed.positions.table[: model.cfg.max_positions, order]
    out["model.shared.weight"] = model.tgt_embed.tokens.weight[:, order]
    for side in ("encoder", "decoder"):
        out[f"model.{side}.embed_positions.weight"] = table
        norm(f"model.{side}.layer_norm", getattr(model, f"{side}_norm"))
    for i, layer in enumerate(model.encoder):
        self_attention(f"model.encoder.layers.{i}", layer)
        ffn(f"model.encoder.layers.{i}", layer)
    for i, layer in enumerate(model.decoder):
        name = f"model.decoder.layers.{i}"
        self_attention(name, layer)
        cross = layer.cross_attn
        for part in "qkv":
            reads(f"{name}.encoder_attn.{part}_proj", getattr(cross, f"{part}_proj"))
        writes(f"{name}.encoder_attn.out_proj", cross.out_proj)
        norm(f"{name}.encoder_attn_layer_norm", layer.cross_norm)
        ffn(name, layer)
    return {k: v.detach().clone().contiguous() for k, v in out.items()}


def special_ids() -> dict[str, int]:
    """nmt's fixed special ids under transformers' names."""
    return {
        "pad_token_id": PAD,
        "bos_token_id": BOS,
        "eos_token_id": EOS,
        "decoder_start_token_id": BOS,  # nmt's target inputs start with <s>
        "forced_eos_token_id": EOS,  # at the length limit, </s> (as nmt's search)
    }


def pegasus_model(loaded: Loaded) -> Any:
    """A PegasusForConditionalGeneration computing what ``loaded.model`` computes."""
    from transformers import PegasusConfig, PegasusForConditionalGeneration

    m = loaded.cfg.model
    config = PegasusConfig(
        vocab_size=len(loaded.vocabs.tgt),
        d_model=m.d_model,
        encoder_layers=m.encoder_layers,
        decoder_layers=m.decoder_layers,
        encoder_attention_heads=m.heads,
        decoder_attention_heads=m.heads,
        encoder_ffn_dim=m.ffn,
        decoder_ffn_dim=m.ffn,
        activation_function="relu",
        dropout=m.dropout,
        attention_dropout=m.dropout,
        activation_dropout=m.dropout,
        max_position_embeddings=m.max_positions,
        scale_embedding=True,  # nmt multiplies token embeddings by sqrt(D)
        tie_word_embeddings=True,
        **special_ids(),
    )
    hf = PegasusForConditionalGeneration(config)
    missing, unexpected = hf.load_state_dict(pegasus_weights(loaded.model), strict=False)
    embeds = [f"model.{side}.embed_tokens.weight" for side in ("encoder", "decoder")]
    tied = {"lm_head.weight", "final_logits_bias", *embeds}
    if set(missing) - tied or unexpected:
        raise AssertionError(f"Pegasus names changed: missing {missing}, unexpected {unexpected}")
    hf.tie_weights()
    return hf.eval()


def remote_model(loaded: Loaded, recipe: dict[str, Any]) -> Any:
    """nmt's model in :mod:`nmt.export.modeling_nmt`'s wrapper, registered so that
    ``save_pretrained`` ships the modelling file and names it in ``auto_map``."""
    from nmt.export.modeling_nmt import NmtConfig, NmtForConditionalGeneration

    config = NmtConfig(
        nmt_recipe=recipe,
        src_vocab_size=len(loaded.vocabs.src),
        vocab_size=len(loaded.vocabs.tgt),
        share_embeddings=loaded.vocabs.joint,
        nmt_version=__version__,
        **special_ids(),
    )
    NmtConfig.register_for_auto_class()
    NmtForConditionalGeneration.register_for_auto_class("AutoModelForSeq2SeqLM")
    hf = NmtForConditionalGeneration(config)
    hf.nmt.load_state_dict(loaded.model.state_dict())
    return hf.eval()


def hf_tokenizer(vocab: Vocab, max_positions: int) -> Any:
    """``vocab`` as a fast tokenizer: the same pieces and ids, ``</s>`` appended."""
    from sentencepiece import sentencepiece_model_pb2
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import SpmConverter

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(vocab.model)
    pieces = [(p.piece, p.score) for p in proto.pieces]
    if proto.trainer_spec.model_type == 2:  # BPE: a piece -> id table
        pieces = {piece: i for i, (piece, _) in enumerate(pieces)}
    tokenizer = SpmConverter.build_tokenizer_from_spm_proto(proto, pieces)
    eos = vocab.id_to_piece(EOS)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"$A {eos}", special_tokens=[(eos, EOS)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token=vocab.id_to_piece(UNK),
        pad_token=vocab.id_to_piece(PAD),
        bos_token=vocab.id_to_piece(BOS),
        eos_token=eos,
        model_max_length=max_positions,  # nmt keeps max_positions − 1 pieces and </s>
    )


def portable_tokenizer_config(path: Path) -> None:
    """Name the tokenizer's class as transformers 4 and 5 both know it: 5 writes
    ``TokenizersBackend``, a name 4 refuses ("does not exist"); both load
    ``PreTrainedTokenizerFast`` from the same tokenizer.json. Its inputs are the ids
    and the mask only: 4's class also returns ``token_type_ids``, which ``generate``
    refuses for these models."""
    config = json.loads(path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config["model_input_names"] = ["input_ids", "attention_mask"]
    write_text(path, json.dumps(config, indent=2, ensure_ascii=False) + "\n")


def generation_config(loaded: Loaded, cached: bool) -> Any:
    """The recipe's search as far as ``generate`` has it: the beam, never PAD or
    BOS, </s> forced at the length cap. Not expressible: the limit a·S + b per
    sentence (``max_new_tokens``, one number per call: the card gives the formula),
    GNMT's length penalty (transformers divides by length ** alpha), the coverage
    penalty and the word reward."""
    from transformers import GenerationConfig

    d = loaded.cfg.decode
    return GenerationConfig(
        num_beams=d.beam,
        length_penalty=d.alpha,
        max_new_tokens=loaded.cfg.model.max_positions - 1,  # nmt's cap
        suppress_tokens=[PAD, BOS],
        use_cache=cached,
        **special_ids(),
    )


def refuse_unexportable(loaded: Loaded, checkpoint: Path, obstacle: str | None) -> None:
    """One line naming why a model cannot be exported to transformers: separate
    vocabularies, sentence groups, or (for remote code) a plug-in's kind."""
    if not loaded.vocabs.joint:
        raise NmtError(
            f"{checkpoint}: not exported: data.vocab.joint is false, and a Hugging Face "
            "tokenizer holds one vocabulary for both sides (export to ctranslate2 instead)"
        )
    if loaded.cfg.model.decoder.group_layers:
        raise NmtError(
            f"{checkpoint}: not exported: model.decoder.group_layers is "
            f"{loaded.cfg.model.decoder.group_layers}, and a Hugging Face tokenizer has no "
            "sentence separator to mark a line's sentences with"
        )
    if obstacle is not None and (outside := plugin_code(loaded)) is not None:
        raise NmtError(
            f"{checkpoint}: not exported: {outside} is a plug-in's code, which the export "
            "would import from this machine when loaded elsewhere (an export carries what "
            "it runs); export a model of nmt's own kinds"
        )


def export_hf(checkpoint: Path, out_dir: Path, license: str = "unknown") -> tuple[Path, str]:
    """Write ``out_dir`` (config, safetensors weights, generation config, tokenizer,
    ``README.md`` model card, ``nmt-export.json``; ``modeling_nmt.py`` and
    ``nmt_code.py`` for remote code) and return it with the class it holds;
    ``license``: the Hub's licence id for the card. Built beside ``out_dir`` and
    renamed into place: a failed export leaves nothing."""
    try:
        import transformers
    except ImportError:
        raise NmtError(f"Hugging Face export needs the hf extra: {install_hint('hf')}") from None
    refuse_occupied(out_dir)
    loaded = load_model(checkpoint, torch.device("cpu"))
    obstacle = stock_obstacle(loaded)
    refuse_unexportable(loaded, checkpoint, obstacle)
    recipe = published_recipe(loaded.cfg.to_dict())
    hf = pegasus_model(loaded) if obstacle is None else remote_model(loaded, recipe)
    hf.generation_config = generation_config(loaded, cached=obstacle is None)
    tokenizer = hf_tokenizer(loaded.vocabs.src, loaded.cfg.model.max_positions)
    kind = type(hf).__name__
    manifest = {
        "format": "hf",
        "class": kind,
        "remote_code": obstacle is not None,
        "why_remote_code": obstacle,
        "transformers_version": transformers.__version__,
        "nmt_version": __version__,
        "license": license,
        "checkpoint": published_name(checkpoint),
        "decode": recipe["decode"],
        # generate's max_new_tokens counts the forced </s>, as nmt's limit does
        "max_new_tokens": length_limit(
            loaded, "min(int(a * n + b), cap) for a source of n ids, </s> included"
        ),
    }

    def fill(tmp: Path) -> None:
        hf.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        portable_tokenizer_config(tmp / "tokenizer_config.json")
        write_text(tmp / "nmt-export.json", json.dumps(manifest, indent=2) + "\n")
        write_text(tmp / "README.md", model_card(loaded, checkpoint, manifest))
        if obstacle is not None:  # the model code, in place of nmt's file that names none
            write_text(tmp / "nmt_code.py", vendored_code())

    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()  # its shard bar for one file
    try:
        write_directory(out_dir, fill)
    finally:
        if bars:
            transformers.utils.logging.enable_progress_bar()
    return out_dir, kind
