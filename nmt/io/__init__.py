"""Files and checkpoints: atomic writes, the run directory and its lock, checkpoints."""
