"""Inputs five times longer than any training input: every variant decodes them,
sinusoidal positions, local windows and predicted centres stay on the source."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from nmt.attention import ATTENTION
from nmt.decoding.search import encode_source, translate_lines
from nmt.inspection.maps import attention_maps
from nmt.setup.decoding import DecodeConfig
from nmt.training.run import prepare

OPTIONS = {"local_m": {"window": 2}, "local_p": {"window": 2}, "local_s": {"window": 2}}


@pytest.mark.parametrize("kind", ATTENTION.names())
def test_an_input_five_times_the_longest_training_input_decodes(kind, tiny_config, toy_dir):
    cfg = tiny_config(
        model={"attention": {"kind": kind, **OPTIONS.get(kind, {})}, "max_positions": 2048}
    )
    trainer = prepare(cfg, "cpu")
    batches = trainer.data.train.epoch_batches(512, 0, 0)[:4]
    for batch in batches:  # a few updates, so that the weights are not the initial ones
        trainer.train_step([trainer.data.train.collate(batch)])
    model, vocabs = trainer.model.eval(), trainer.data.vocabs
    train_src = (toy_dir / "train.src").read_text().splitlines()
    longest = max(train_src, key=lambda s: len(vocabs.src.encode([s])[0]))
    long_input = " ".join([longest] * 5)
    pieces = len(vocabs.src.encode([long_input])[0])
    assert pieces >= 5 * max(len(ids) for ids in vocabs.src.encode(train_src))
    decode = dataclasses.replace(DecodeConfig(), beam=2, max_len_a=0.1, max_len_b=5)
    out = translate_lines(model, vocabs.src, vocabs.tgt, [long_input, "lo"], decode, "cpu")
    assert len(out) == 2 and all(len(n) == 1 for n in out)
    # attention while reading a target twice as long: finite, on the source, centres in it
    src_ids = encode_source(vocabs.src, [long_input], 2047)
    target = [4 + i % (len(vocabs.tgt) - 4) for i in range(2 * pieces)]  # twice the source
    (amap,) = attention_maps(model, vocabs.src, vocabs.tgt, src_ids, [target])
    assert np.isfinite(amap.weights).all() and amap.weights.shape[-1] == pieces + 1
    np.testing.assert_array_less(amap.weights.sum(-1), 1 + 1e-4)
    if amap.centers is not None:
        assert amap.centers.min() >= 0 and amap.centers.max() <= pieces + 1
        late = amap.weights[..., pieces + 1 :, :].sum(-1)  # targets past the source's end
        assert (late > 0).all()  # their windows clamp onto the source, not off its end
