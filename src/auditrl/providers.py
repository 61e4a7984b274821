"""Importing this module registers auditrl's model providers (`local/...`, `scripted/...`, `sim/...`) with inspect-ai.

`auditrl.inspect_registry`, the inspect-ai entry point, imports it along with the tasks; `models.roles`
imports it directly, so auditrl's own commands resolve these providers without the entry point.
"""

from auditrl.auditworld import provider
from auditrl.models import local, scripted

__all__ = ["local", "provider", "scripted"]
