"""The Transformer encoder-decoder (:mod:`nmt.model.seq2seq`); its encoder blocks and
decoder stacks are the registries ``ENCODER_BLOCKS`` and ``DECODERS`` of
:mod:`nmt.setup.model`, which loads no torch."""
