"""Corpora, SentencePiece vocabularies and batching."""
