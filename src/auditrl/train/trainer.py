"""TRL's GRPOTrainer, scoring only the tokens it trains on.

A multi-turn audit's completion is mostly environment tokens (tool results, target replies, the report
request: env_mask 0), which the loss ignores. TRL still projects every completion position through the
LM head, whose vocabulary-wide softmax is the costliest part of an update on a CPU after the matmuls.
Marking the environment positions' labels -100 makes TRL's fused LM head skip them; the loss, the
advantages and the logged metrics are unchanged, since all of them are already masked there.

TRL 1.16's fused head drops unlabelled positions only where its Triton kernels run (CUDA, XPU); on
other devices it projects every position, prompt included, so that compiled tile shapes stay fixed
(XLA devices). Eager CPU code has no tile shapes to keep, so on a CPU the loss forward selects the
labelled positions too: an audit's opening prompt alone is hundreds of positions of a 49k-word softmax.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import trl.trainer.utils as trl_utils
from torch import nn
from trl import GRPOTrainer

IGNORED_LABEL = -100


def _skip_environment_labels(tool_mask: torch.Tensor) -> Any:
    """A forward pre-hook setting the label of every environment position of the completion to -100."""

    def hook(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        labels = kwargs.get("labels")
        if labels is not None:
            width = tool_mask.shape[1]
            labels = labels.clone()
            labels[:, -width:] = labels[:, -width:].masked_fill(tool_mask.to(labels.device) == 0, IGNORED_LABEL)
            kwargs["labels"] = labels
        return args, kwargs

    return hook


@contextmanager
def labelled_positions_only_on_cpu() -> Iterator[None]:
    """TRL's fused LM head projects only labelled positions on a CPU too (see the module docstring)."""
    triton_devices = trl_utils._use_triton

    def compact(device: torch.device) -> bool:
        return device.type == "cpu" or triton_devices(device)

    trl_utils._use_triton = compact
    try:
        yield
    finally:
        trl_utils._use_triton = triton_devices


class AuditGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose loss forward leaves environment tokens out of the LM head (see module docstring)."""

    def _compute_loss(self, model: nn.Module, inputs: dict[str, Any]) -> torch.Tensor:
        tool_mask = inputs.get("tool_mask")
        if tool_mask is None:
            return super()._compute_loss(model, inputs)
        handle = model.register_forward_pre_hook(_skip_environment_labels(tool_mask), with_kwargs=True)
        try:
            with labelled_positions_only_on_cpu():
                return super()._compute_loss(model, inputs)
        finally:
            handle.remove()
