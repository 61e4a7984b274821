from __future__ import annotations

import pytest

from auditrl.auditworld.world import World
from auditrl.behaviors.library import load_behaviors


@pytest.fixture(scope="session")
def world() -> World:
    return World.build(load_behaviors())
