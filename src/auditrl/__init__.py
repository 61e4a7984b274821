"""auditrl: train and evaluate alignment-auditing agents with reinforcement learning."""

import importlib.metadata

__version__ = importlib.metadata.version("auditrl")
