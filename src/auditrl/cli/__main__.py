"""`python -m auditrl.cli`, the form that `accelerate launch -m` needs for multi-process training."""

from auditrl.cli import app

app()
