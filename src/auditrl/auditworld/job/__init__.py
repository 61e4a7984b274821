"""The AuditWorld job: train auditors in the simulated world under each reward design, evaluate, report.

The world itself is the enclosing package `auditrl.auditworld`; this subpackage is the job on top of it
that `make run` starts, with its config (`config`), orchestration (`run`) and report (`report`).
"""
