"""The AuditWorld job: train auditors in the simulated world under each reward design, evaluate, report.

`auditrl.sim` is the environment (world, targets, judges, policies, training); this package is the job
on top of it that `make run` starts, with its config (`config`), orchestration (`job`) and report
(`report`).
"""
