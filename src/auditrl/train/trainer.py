"""TRL's GRPOTrainer, scoring only the tokens it trains on.

A multi-turn audit's completion is mostly environment tokens (tool results, target replies, the report
request: env_mask 0), which the loss ignores. TRL still projects every completion position through the
LM head, whose vocabulary-wide softmax is the costliest part of an update on a CPU after the matmuls.
Marking the environment positions' labels -100 makes TRL's fused LM head skip them; the loss, the
advantages and the logged metrics are unchanged, since all of them are already masked there. The labels
are set alike in every log-probability pass (loss, old and reference log-probabilities), so each pass
scores the same positions.

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
from trl.trainer.utils import pad

from auditrl.train.extensions import NO_EXTENSION, TrainingExtension

IGNORED_LABEL = -100


def _skip_environment_labels(tool_mask: torch.Tensor) -> Any:
    """A forward pre-hook setting the label of every environment position of the completion to -100.

    A pass may run its rows in chunks (one forward each): the hook takes the next rows of `tool_mask` per call."""
    cursor = 0

    def hook(
        module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        nonlocal cursor
        labels = kwargs.get("labels")
        if labels is not None:
            rows = tool_mask[cursor : cursor + labels.shape[0]].to(labels.device)
            cursor += labels.shape[0]
            width = rows.shape[1]
            labels = labels.clone()
            labels[:, -width:] = labels[:, -width:].masked_fill(rows == 0, IGNORED_LABEL)
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
    """GRPOTrainer whose log-probability passes leave environment tokens out of the LM head (module docstring).

    Every pass labels the same positions: the loss pass, and the passes over the generation batch that compute
    the old log-probabilities (vLLM's importance sampling, or more than one update per batch) and the
    reference model's. A position scored in one pass and not in another would enter the policy ratio as
    exp(0 - old logprob), which overflows on the improbable tokens a target writes (inf x mask 0 = NaN).

    `extension` (auditrl.train.extensions) may transform the advantages TRL computed, per token: TRL takes
    advantages shaped (rows, completion positions) as given."""

    _label_mask: torch.Tensor | None = None
    _extra_fields: dict[str, Any] | None = None

    def __init__(self, *args: Any, extension: TrainingExtension = NO_EXTENSION, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.extension = extension

    def _generate(self, prompts: list[Any]) -> tuple[Any, ...]:
        result = super()._generate(prompts)
        _, completion_ids, env_mask, _, _, extra_fields, *_ = result
        self._label_mask = None if env_mask is None else self._generation_mask(completion_ids, env_mask)
        self._extra_fields = extra_fields
        return result

    def padded(self, rows: list[list[int]], value: int) -> torch.Tensor:
        """Per-position rows padded on the right as TRL pads the completions (GRPOConfig resolves the string forms
        of `pad_to_multiple_of`, "auto" and "none", to an int or None)."""
        multiple = self.pad_to_multiple_of
        if isinstance(multiple, str):
            raise TypeError(f"pad_to_multiple_of {multiple!r} was not resolved by GRPOConfig")
        return pad([torch.tensor(m) for m in rows], padding_value=value, padding_side="right",
                   pad_to_multiple_of=multiple)  # fmt: skip

    def _generation_mask(self, completion_ids: list[list[int]], env_mask: list[list[int]]) -> torch.Tensor:
        """The tool mask TRL builds for the generation batch (right-padded with 1, truncated rows zeroed)."""
        mask = self.padded(env_mask, 1)
        if self.mask_truncated_completions:
            ends = {*self.eos_token_ids, self._tokenizer.pad_token_id}
            kept = torch.tensor([ids[-1] in ends for ids in completion_ids])
            mask = mask * kept.unsqueeze(1).int()
        return mask.to(self.accelerator.device)

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        try:
            output = super()._generate_and_score_completions(inputs)
            output["advantages"] = self.extension.advantages(output, self, self._extra_fields or {})
            return output
        finally:
            self._label_mask = None
            self._extra_fields = None

    def _compute_loss(self, model: nn.Module, inputs: dict[str, Any]) -> torch.Tensor:
        self._label_mask = inputs.get("tool_mask")
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._label_mask = None

    def _get_per_token_logps_and_entropies(
        self, model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int,
        *args: Any, **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:  # fmt: skip
        mask = self._label_mask
        if mask is None:
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
            )
        if tuple(mask.shape) != (input_ids.shape[0], logits_to_keep):
            raise RuntimeError(
                f"environment-token mask {tuple(mask.shape)} does not match the pass over {input_ids.shape[0]} rows "
                f"x {logits_to_keep} completion positions"
            )
        handle = model.register_forward_pre_hook(_skip_environment_labels(mask), with_kwargs=True)
        try:
            with labelled_positions_only_on_cpu():
                return super()._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
                )
        finally:
            handle.remove()
