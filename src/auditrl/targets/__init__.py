"""Targets whose behavior lives in their weights: LoRA implants of a behavior into a local chat model."""
