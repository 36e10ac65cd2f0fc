"""Inspecting a translation: a sentence's attention maps, heatmaps and their plotting,
the word alignments read from attention, and the per-sentence diagnostics."""
