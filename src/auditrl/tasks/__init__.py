"""auditrl as Inspect tasks: `inspect eval auditrl/audit` and `inspect eval auditrl/transfer`.

The dataset is the chosen behaviors' seeds (`dataset`), the solver auditrl's episode engine playing the
`auditor` and `target` model roles (`solver`), and the scorers the suite's judges on the `judge` role
(`scorers`); epochs are rollouts. Every sample keeps its whole transcript in its store, so `auditrl
evaluate`, `judge score`, `strategies` and `crux build` read the task's logs as they read a run directory.
"""
