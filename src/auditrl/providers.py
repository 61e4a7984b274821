"""inspect-ai entry point: importing this module registers auditrl's model providers.

inspect-ai loads it (pyproject `[project.entry-points.inspect_ai]`) the first time a model string names
a provider it does not know, so `local/...`, `scripted/...` and `sim/...` work anywhere inspect-ai
resolves models, including `inspect eval --model local/smollm2`.
"""

from auditrl.models import local, scripted
from auditrl.sim import provider

__all__ = ["local", "provider", "scripted"]
