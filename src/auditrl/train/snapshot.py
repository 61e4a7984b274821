"""The frozen policy snapshot that plays the reference rollouts of reference pairwise, as the paper ran it.

Every step, each group's reference is a rollout of a frozen snapshot of the policy on the group's own
(behavior, seed, family). The snapshot is a saved copy of the LoRA adapter, swapped into the policy only
while the reference rollouts are generated. The first copy is taken before any update, when LoRA's B
matrices are still zero, so the first snapshot is the base model; a new copy replaces it every
`refresh_every` steps. Copies are kept in the run directory by the step they were taken at, so a resumed
run finds the snapshot that was active at its checkpoint (taken from the same weights as before).

The swap copies adapter tensors in place, which needs each rank to hold the whole adapter (one process,
DDP, DeepSpeed ZeRO-1/2); with vLLM the swapped weights are pushed to the engine and pushed back after.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

SNAPSHOTS_DIR = "reference_snapshots"
ADAPTER_MARK = "lora_"


def adapter_parameters(model: torch.nn.Module) -> dict[str, torch.nn.Parameter]:
    """The LoRA parameters of the policy, by name."""
    return {name: p for name, p in model.named_parameters() if ADAPTER_MARK in name}


class PolicySnapshot:
    """A frozen copy of the adapter, refreshed every `refresh_every` steps and persisted in `folder`."""

    def __init__(self, folder: Path, refresh_every: int) -> None:
        if refresh_every < 1:
            raise ValueError(f"refresh_every must be >= 1, got {refresh_every}")
        self.folder = folder
        self.refresh_every = refresh_every
        self.step: int | None = None
        self.weights: dict[str, torch.Tensor] = {}

    def taken_at(self, step: int) -> int:
        """The step whose weights are the snapshot in force at `step`."""
        return step - step % self.refresh_every

    def _path(self, step: int) -> Path:
        return self.folder / f"step-{step:06d}.safetensors"

    def update(self, model: torch.nn.Module, step: int, *, save: bool) -> None:
        """Make the snapshot the one in force at `step`: load it if it was saved, else copy the adapter now."""
        due = self.taken_at(step)
        if self.step == due:
            return
        path = self._path(due)
        if path.exists():
            self.weights = load_file(str(path))
        else:
            if due != step:
                raise RuntimeError(f"{path}: the reference snapshot of step {due} is missing; cannot take it at {step}")
            self.weights = {
                n: p.detach().to("cpu", copy=True).contiguous() for n, p in adapter_parameters(model).items()
            }
            if save:
                self.folder.mkdir(parents=True, exist_ok=True)
                partial = path.with_suffix(".partial")
                save_file(self.weights, str(partial))
                partial.replace(path)
        if not self.weights:
            raise ValueError("the policy has no LoRA parameters to snapshot")
        self.step = due

    @contextmanager
    def swapped_in(self, model: torch.nn.Module, sync: Callable[[], None] | None = None) -> Iterator[None]:
        """Inside the block the policy plays the snapshot; its own adapter weights are put back after.

        `sync` pushes the current weights to a generation engine (vLLM) after each swap."""
        params = adapter_parameters(model)
        if set(params) != set(self.weights):
            raise RuntimeError("the reference snapshot and the policy have different LoRA parameters")
        own = {n: p.detach().clone() for n, p in params.items()}
        with torch.no_grad():
            for n, p in params.items():
                p.copy_(self.weights[n].to(p.device, p.dtype))
        try:
            if sync is not None:
                sync()
            yield
        finally:
            with torch.no_grad():
                for n, p in params.items():
                    p.copy_(own[n])
            if sync is not None:
                sync()
