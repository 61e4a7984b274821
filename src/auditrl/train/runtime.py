"""What a training run shares between rollouts and rewards: one event loop and the process layout."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import timedelta
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


def is_main_process() -> bool:
    """Whether this is the main process of the launch (every process of a run has started the state by then)."""
    return bool(PartialState().is_main_process)


def distributed_state(timeout_seconds: int) -> PartialState:
    """The process layout, initialised as the Trainer will (CPU processes use gloo when no GPU is present).

    The first call starts the process group, so it must carry the collective timeout: the Trainer passes
    `ddp_timeout` only when it creates the state itself, and a group started without it keeps torch's
    default (10 minutes under NCCL), shorter than a step in which rank 0 makes every judge call."""
    return PartialState(cpu=not torch.cuda.is_available(), timeout=timedelta(seconds=timeout_seconds))
