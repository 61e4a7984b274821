"""AuditWorld: a fast simulated world that keeps the incentive structure of auditing, for offline research."""
