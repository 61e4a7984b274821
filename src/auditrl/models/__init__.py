"""Model roles: resolving auditor, target, judge and realism specs to inspect-ai models, plus in-process providers."""
