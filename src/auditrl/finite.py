"""Training stops at the first non-finite loss or weight, instead of writing NaN results that look normal.

One NaN in a policy's weights makes every later step NaN, and a job that went on would write a results
file and a report of a policy that is no policy at all. Both trainers check after each update (AuditWorld's
loop and the LM trainer's `StopOnNonFinite` callback call `check_finite`), so the error names the step, and the
last saved checkpoint is one trained on finite numbers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch


class NonFiniteTrainingError(RuntimeError):
    """The loss or a weight became NaN or infinite; the message names the step and what diverged."""


def _first_non_finite(parameters: Iterable[tuple[str, torch.Tensor]]) -> str | None:
    for name, tensor in parameters:
        if not bool(torch.isfinite(tensor.detach()).all()):
            return name
    return None


def check_finite(step: int, loss: float | torch.Tensor, named_parameters: Iterable[tuple[str, torch.Tensor]]) -> None:
    """Raise NonFiniteTrainingError if `loss` or any of the parameters is NaN or infinite after step `step`."""
    value = float(loss.detach()) if isinstance(loss, torch.Tensor) else float(loss)
    if not math.isfinite(value):
        raise NonFiniteTrainingError(
            f"training diverged at step {step}: the loss is {value} (lower the learning rate or the coefficients)"
        )
    bad = _first_non_finite(named_parameters)
    if bad is not None:
        raise NonFiniteTrainingError(
            f"training diverged at step {step}: weight {bad!r} holds NaN or infinite values "
            "(lower the learning rate or the coefficients)"
        )
