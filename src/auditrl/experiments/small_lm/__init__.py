"""The small-model experiment: report-writing GRPO of SmolLM2-135M on a CPU, with report grammars, a probing
teacher, claim exploration and thresholds, quote credit, the choice gradient and the report-only evaluations.

Entry point: `python -m auditrl.experiments.small_lm <command>` (train, sft, choice-gradient); configs in
configs/experiments/small_lm/; results in docs/experiments/small_lm.md.
"""
