"""GRPO training: group-relative advantages shared by the LM trainer and AuditWorld, configs, checkpoints, monitors."""
