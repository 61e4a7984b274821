"""inspect-ai entry point: importing this module registers auditrl's model providers and tasks.

inspect-ai loads it (pyproject `[project.entry-points.inspect_ai]`) the first time a model string or task
name is in the `auditrl` namespace it does not know, so `local/...`, `scripted/...` and `sim/...` work
anywhere inspect-ai resolves models (`inspect eval --model local/smollm2`), and `inspect eval auditrl/audit`
and `auditrl/transfer` find their tasks.
"""

from auditrl import providers
from auditrl.tasks import audit

__all__ = ["audit", "providers"]
