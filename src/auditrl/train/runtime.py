"""What a training run shares between rollouts and rewards: one event loop and the process layout."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import torch
from accelerate import PartialState

T = TypeVar("T")


class AsyncRunner:
    """One event loop for the whole run, so async model clients (targets, judges) keep a single loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.loop.close()


def distributed_state() -> PartialState:
    """The process layout, initialised as the Trainer will (CPU processes use gloo when no GPU is present)."""
    return PartialState(cpu=not torch.cuda.is_available())

