"""auditrl: train and evaluate alignment-auditing agents with reinforcement learning."""

__version__ = "0.1.0"
