"""An nmt model as a Hugging Face ``transformers`` model, for the variants no stock
class expresses (local_m, local_p, local_s, hard, sparsemax, the other scores,
position schemes and decoders).

``nmt export --format hf`` copies this file into the export as ``modeling_nmt.py``
and names its classes in ``config.json``'s ``auto_map``, so that
``AutoModelForSeq2SeqLM.from_pretrained(DIR, trust_remote_code=True)`` builds
nmt's own :class:`~nmt.model.seq2seq.Transformer` from the recipe's ``model``
section and loads the exported weights into it: the export runs the code that
was trained, not a re-implementation of each variant. That code travels with the
export, in ``nmt_code.py`` (:mod:`nmt.export.nmt_code`, :mod:`nmt.export.vendor`):
loading needs transformers and torch, not nmt.

``generate`` recomputes the decoder over the whole prefix at each step (no
cache: ``use_cache`` is off in the export's generation config), which gives what
nmt's incremental decoder gives (a property the test suite checks for every
variant) at O(T²) cost per sentence instead of O(T).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from transformers import GenerationMixin, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput

from .nmt_code import nmt_module  # nmt's model code: the export's own copy

Transformer = nmt_module("nmt.model.seq2seq").Transformer
NmtError = nmt_module("nmt.errors").NmtError
from_dict = nmt_module("nmt.setup.config").from_dict
upgrade_recipe = nmt_module("nmt.setup.migrations").upgrade_recipe
ModelConfig = nmt_module("nmt.setup.model").ModelConfig


class NmtConfig(PretrainedConfig):
    """The run's recipe (``nmt_recipe``, as its checkpoint holds it: its ``model``
    section builds the model, through nmt's migrations and plug-ins) and the
    vocabulary sizes; the special ids are nmt's fixed ones (nmt.data.vocab)."""

    model_type = "nmt"

    def __init__(
        self,
        nmt_recipe: dict[str, Any] | None = None,
        src_vocab_size: int = 0,
        vocab_size: int = 0,
        share_embeddings: bool = True,
        **kwargs: Any,
    ) -> None:
        self.nmt_recipe = nmt_recipe or {}
        self.src_vocab_size = src_vocab_size
        self.vocab_size = vocab_size  # the target's: what the logits range over
        self.share_embeddings = share_embeddings
        kwargs.setdefault("is_encoder_decoder", True)
        super().__init__(**kwargs)


class NmtEncoder(nn.Module):
    """``get_encoder()`` for ``generate``: source ids (B,S) -> the encoder output."""

    main_input_name = "input_ids"

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = [model]  # a list: not a second owner of the weights

    def forward(self, input_ids: Tensor, **kwargs: Any) -> BaseModelOutput:
        memory, _ = self.model[0].encode(input_ids)  # (B,S,D)
        return BaseModelOutput(last_hidden_state=memory)


class NmtForConditionalGeneration(PreTrainedModel, GenerationMixin):
    """nmt's encoder-decoder under the name ``nmt``; logits (B,T,V) for ``generate``."""

    config_class = NmtConfig
    base_model_prefix = "nmt"
    main_input_name = "input_ids"

    def __init__(self, config: NmtConfig) -> None:
        super().__init__(config)
        self.nmt = self.build()
        self._computed: dict[str, Tensor] | None = None  # see _init_weights
        self.encoder = NmtEncoder(self.nmt)
        # every parameter nmt shares between modules (the embeddings and the output
        # layer tied to them, the two sides' learned position table), each copy named
        # with the first: safetensors refuses shared tensors it was not told of
        first: dict[int, str] = {}
        ties = {}
        for name, p in self.nmt.named_parameters(remove_duplicate=False):
            if id(p) in first:
                ties[f"nmt.{name}"] = f"nmt.{first[id(p)]}"
            else:
                first[id(p)] = name
        self._tied_weights_keys = ties
        config.tie_word_embeddings = bool(ties)  # transformers ties nothing otherwise
        self.post_init()

    def build(self) -> Transformer:
        """nmt's model of the recipe's ``model`` section (the rest of the recipe is a
        record of how it was trained), its weights as nmt initialises them."""
        c = self.config
        recipe = upgrade_recipe(c.nmt_recipe)
        if not isinstance(recipe, dict) or "model" not in recipe:
            raise NmtError("the export's config.json: nmt_recipe holds no model section")
        cfg = from_dict(ModelConfig, recipe["model"], "model")
        return Transformer(cfg, c.src_vocab_size, c.vocab_size, c.pad_token_id, c.share_embeddings)

    def _init_weights(self, module: nn.Module) -> None:
        """Every parameter comes from the export. What nmt computes and does not
        save (the sinusoid table, rotary frequencies, ALiBi slopes: non-persistent
        buffers) transformers' loading leaves empty: it is computed again, by
        building the model once more on the CPU and copying it from there."""
        if not module._non_persistent_buffers_set:
            return
        if self._computed is None:  # once per load; the twin model is not kept
            with torch.device("cpu"):
                twin = self.build()
            self._computed = {f"nmt.{name}": b for name, b in twin.named_buffers()}
        prefix = next(name for name, sub in self.named_modules() if sub is module)
        with torch.no_grad():
            for name in module._non_persistent_buffers_set:
                getattr(module, name).copy_(self._computed[f"{prefix}.{name}"])

    def get_encoder(self) -> NmtEncoder:
        return self.encoder

    def get_input_embeddings(self) -> nn.Embedding:
        return self.nmt.src_embed.tokens

    def get_output_embeddings(self) -> nn.Linear:
        return self.nmt.output

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        decoder_input_ids: Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple[Tensor, ...] | None = None,
        **kwargs: Any,
    ) -> Seq2SeqLMOutput:
        """Source ids (B,S) (or their ``encoder_outputs``) and target inputs (B,T),
        ``<s>`` first -> logits (B,T,V). Inference only: training stays nmt's."""
        if encoder_outputs is None:
            encoder_outputs = self.encoder(input_ids)
        memory = encoder_outputs[0]  # (B,S,D)
        if attention_mask is None:
            attention_mask = input_ids != self.config.pad_token_id
        state = self.nmt.decoder_state(memory, attention_mask.bool().unsqueeze(1))
        logits = self.nmt.decode(decoder_input_ids, state)  # (B,T,V)
        return Seq2SeqLMOutput(logits=logits, encoder_last_hidden_state=memory)
