"""Inspecting attention: a sentence's attention maps, heatmaps and their plotting,
and the word alignments read from attention."""
