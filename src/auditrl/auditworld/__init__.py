"""AuditWorld: a fast simulated world that keeps the incentive structure of auditing, for offline research.

This package is the world (its targets, text, judges, reward designs, policies and training); its job,
the experiment `make run` starts, is the subpackage `auditrl.auditworld.job`. Its text targets are the
`sim/<family>` models and its judges `judge: sim`: "sim" names the simulated provider, not a package.
"""
