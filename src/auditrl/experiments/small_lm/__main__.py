"""`python -m auditrl.experiments.small_lm <command>`."""

from auditrl.experiments.small_lm.cli import app

app()
