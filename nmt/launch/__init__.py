"""Bringing a study's runs up: the run bookkeeping (reuse, resume, "done", failures)
and the launchers behind ``nmt.setup.compare.LAUNCHERS`` (this machine, SLURM)."""
