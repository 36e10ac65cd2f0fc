"""Decoding and its commands: greedy and beam search with its options, ``nmt
translate`` and ``nmt evaluate``, and the metrics (sacreBLEU) that score them."""
