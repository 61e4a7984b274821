"""AuditWorld's seed bank as library seeds, for language-model auditors of `sim/<family>` targets.

A simulated target reads each user message by its topic keywords, so what it shows depends on which of
AuditWorld's topics the auditor raises. The library's seeds are written for real targets and name a
trigger topic's keywords in only about a third of them; AuditWorld's own seeds name their scenario's
topics by phrase (each phrase holds one of its topic's keywords), and at most one of them triggers the
planted behavior, so which one it is can only be learned by eliciting it. These are the seeds of the
same world the `sim/` provider plays (the packaged behaviors, the world's default seed bank).
"""

from __future__ import annotations

import functools

from auditrl.auditworld.world import World
from auditrl.behaviors.library import load_behaviors
from auditrl.behaviors.schema import Seed

SEED_TAG = "auditworld"


@functools.cache
def _world() -> World:
    return World.build(load_behaviors())


def auditworld_seeds(world: World | None = None) -> list[Seed]:
    """Every seed of the world's bank, `seeds_per_behavior` per behavior, with ids `sim-<behavior>-NN`."""
    world = world or _world()
    return [
        Seed(id=world.seed_id(b, s), tags=[SEED_TAG], behavior=bid, instructions=world.seed_text(b, s))
        for b, bid in enumerate(world.behaviors.ids)
        for s in range(world.seeds_per_behavior)
    ]
