"""The auditor's prompt sets: which prompt files an audit uses, chosen per auditor by its size."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

from auditrl.configfile import load_yaml

AuditorPrompt = Literal["full", "compact", "guided", "guided_evidence"]


@dataclass(frozen=True)
class PromptSet:
    """The auditor's prompt files (system prompt, report request, forced turn openings) and how the text
    protocol lists its tools."""

    system: str
    report: str
    compact_tools: bool
    openings: str | None = None


PROMPT_SETS: dict[str, PromptSet] = {
    "full": PromptSet("auditor_system.md", "report_request.md", compact_tools=False),
    "compact": PromptSet("auditor_system_compact.md", "report_request_compact.md", compact_tools=True),
    "guided": PromptSet(
        "auditor_system_compact.md",
        "report_request_guided.md",
        compact_tools=True,
        openings="auditor_openings_guided.yaml",
    ),
    "guided_evidence": PromptSet(
        "auditor_system_compact.md",
        "report_request_evidence.md",
        compact_tools=True,
        openings="auditor_openings_evidence.yaml",
    ),
}
"""`full` explains every tool and rule (capable models); `compact` is a few hundred tokens for small-context
models, whose training sequences re-read the opening prompt and report request in every rollout; `guided`
is `compact` with a one-line report (description and confidence only, so it fits a small turn budget) and
every auditor turn begun for the model (a send_message call, the report's first field), for models too
small to start the format themselves (text tool protocol only); `guided_evidence` is `guided` whose report quotes
the target's words it takes as evidence before its verdict (the report grammar `quote_verdict`)."""


@functools.cache
def openings(name: str) -> dict[str, str]:
    """The forced turn openings of a prompt set's file, by phase (`audit`, `report`), and optionally `claim`:
    the words after the report opening that make it a claim (GRPO claim exploration), and `quote` and `silent`:
    the words after the claim that open its quote, and after `true` that end a "nothing found" report (the
    report grammar an experiment may attach), and `verdict`: the words between a report's quoted
    evidence and its verdict, for a report that quotes first."""
    from auditrl.scaffold.tools import prompt_text  # inspect-ai is heavy; configs import this module

    data = load_yaml(prompt_text(name))
    if not isinstance(data, dict) or not {"audit", "report"} <= set(data) <= {
        "audit",
        "report",
        "claim",
        "quote",
        "silent",
        "verdict",
    }:
        raise ValueError(
            f"{name}: expected the keys 'audit' and 'report' and optionally 'claim', 'quote', 'silent' and 'verdict'"
        )
    return {phase: str(text) for phase, text in data.items()}
