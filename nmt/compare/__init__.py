"""``nmt compare``: train (or reuse) every variant × seed of a study, evaluate them
identically, and report which is better, where, and with what evidence."""

from nmt.compare.study import compare_runs, run_study

__all__ = ["compare_runs", "run_study"]
