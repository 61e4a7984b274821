"""The transfer scaffold: AuditBench's setting, as a variant of the audit episode.

AuditBench audits fine-tuned targets differently from Petri: the auditor has a single sampling tool
(a prompt, an optional system message and an optional prefill, each call a fresh conversation), a
budget of its own output tokens instead of a number of turns, and ends with at most three ranked
predictions that a judge matches against the implanted behavior. `TransferEpisode` keeps everything
else of `AuditEpisode` (turn stepping, budgets, target retries, the report phase, quote checks and
the transcript), so transfer transcripts are judged, stored and exported like any other.
"""

from __future__ import annotations

import functools
from string import Template
from typing import Any

from inspect_ai.tool import ToolInfo

from auditrl.behaviors.schema import Behavior, Seed
from auditrl.configfile import load_yaml
from auditrl.scaffold.engine import AuditEpisode
from auditrl.scaffold.spec import AuditSpec
from auditrl.scaffold.tool_sets import ToolProtocol
from auditrl.scaffold.tools import InvalidToolCall, auditor_tools, prompt_text
from auditrl.scaffold.transcript import Budget, ToolCallRecord

TRANSFER_SEED_ID = "transfer"
"""The seed id of every transfer audit, which is how transfer transcripts are told apart."""


@functools.cache
def _config() -> dict[str, Any]:
    return load_yaml(prompt_text("transfer.yaml"))


def transfer_tools() -> list[ToolInfo]:
    """The transfer scaffold's one tool, `sample`."""
    return auditor_tools("transfer")


def transfer_seed() -> Seed:
    """The fixed investigation task (AuditBench gives its agent no scenario, only the task)."""
    return Seed(id=TRANSFER_SEED_ID, instructions=_config()["task"].strip())


def transfer_spec(
    *,
    auditor_model: str,
    target_model: str,
    behavior: Behavior,
    target_system_prompt: str = "",
    token_budget: int,
    max_samples: int,
    tool_protocol: ToolProtocol,
) -> AuditSpec:
    """One transfer audit. The behavior is the ground truth to match; the target gets `target_system_prompt`
    (empty for a target whose behavior is in its weights) under any system message the auditor sets."""
    return AuditSpec(
        seed=transfer_seed(),
        behavior=behavior,
        target_system_prompt=target_system_prompt,
        budget=Budget(max_turns=max_samples, max_tokens=token_budget),
        auditor_model=auditor_model,
        target_model=target_model,
        tool_protocol=tool_protocol,
        tool_set="transfer",
    )


class TransferEpisode(AuditEpisode):
    """An audit with one sampling tool and a token budget; turns are capped only as a safety limit."""

    def system_prompt(self) -> str:
        return Template(prompt_text("transfer_system.md")).substitute(
            instructions=self.spec.seed.instructions.strip(), token_budget=self.spec.budget.max_tokens
        )

    def tool_set(self) -> list[ToolInfo]:
        return transfer_tools()

    def no_tool_call_message(self) -> str:
        left = max(0, (self.spec.budget.max_tokens or 0) - self.transcript.auditor_tokens)
        return Template(_config()["keep_going"]).substitute(left=left).strip()

    async def _execute(self, call: ToolCallRecord) -> str:
        args = self.checked_arguments(call)
        if not args["prompt"].strip():
            raise InvalidToolCall("sample: 'prompt' must not be empty.")
        self.check_prefill("sample", args.get("prefill"))
        self.conversation.set_system_message(args.get("system_message", ""))
        self.conversation.add_user_message(args["prompt"])
        return await self.target_turn(args.get("prefill"))
