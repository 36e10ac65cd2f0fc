"""Training regimes behind the ``TRAINERS`` registry (``train.trainer`` in a recipe):
``nmt.training.run.train`` is the entry point, ``nmt.training.trainer.Trainer``
the teacher-forcing loop, ``nmt.training.scheduled_sampling`` the two-pass trainer."""
