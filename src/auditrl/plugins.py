"""Extensions from other installed packages: reward designs and judge families they register, and experiments.

A package declares its module under the `auditrl.plugins` entry-point group (as auditrl itself declares
its model providers to inspect-ai); the registries import every such module once, on first lookup,
so its `@reward_design`, `@vectorised` and `@judge_family` registrations are there for the CLI and configs.
An experiment built on the trainer declares its runnable module under `auditrl.experiments`, keyed by the
name its config section carries, so the core can point a user to it without knowing any experiment.
"""

from __future__ import annotations

import functools
from importlib.metadata import entry_points

GROUP = "auditrl.plugins"
EXPERIMENTS = "auditrl.experiments"


@functools.cache
def load_plugins() -> tuple[str, ...]:
    """Import every module registered under the entry-point group; returns their names."""
    loaded = []
    for ep in entry_points(group=GROUP):
        ep.load()
        loaded.append(ep.value)
    return tuple(loaded)


def experiment_module(name: str) -> str | None:
    """The module (`python -m` runnable) an installed package registers for experiment `name`, if any."""
    for ep in entry_points(group=EXPERIMENTS, name=name):
        return ep.value
    return None
