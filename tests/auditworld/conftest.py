from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

from auditrl.auditworld.policies import MLPPolicy
from auditrl.auditworld.world import World
from auditrl.behaviors.library import load_behaviors


@pytest.fixture(scope="session")
def world() -> World:
    return World.build(load_behaviors())


@pytest.fixture
def same_at_one_and_two_threads() -> Callable[[Callable[[], MLPPolicy]], bool]:
    """Whether `make()` returns a policy with the same weights, bit for bit, with torch at one and at two threads;
    it also checks that `make` leaves torch's thread count as it found it, and restores the caller's count."""

    def check(make: Callable[[], MLPPolicy]) -> bool:
        before = torch.get_num_threads()
        weights = []
        try:
            for threads in (1, 2):
                torch.set_num_threads(threads)
                weights.append(make().weight_views())
                assert torch.get_num_threads() == threads
        finally:
            torch.set_num_threads(before)
        return all(np.array_equal(a, b) for a, b in zip(*weights, strict=True))

    return check
