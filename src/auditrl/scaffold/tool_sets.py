"""The auditor's tool sets and tool protocols: which tools an audit offers, and how the auditor calls them.

A tool set names the tools and their semantics; each follows one Petri version. `petri2` is the set
auditrl has always used (Petri 1 and 2: sending a message returns the target's reply, prefill on
`send_message`); `petri3` is Petri 3.1's (messages and tool results are staged, `resume` runs the
target, conversations can be restarted and tools removed, prefill off); `petri3_prefill` is the same
with `resume(prefill=...)`, as Petri 3's `enable_prefill` gives it. `transfer` is AuditBench's single
sampling tool. Every transcript records the set it was audited with.

A tool protocol is how the auditor model calls them: `native` tool calling, or `text`, where the tools
are described in the prompt and the auditor's plain text is parsed. This module holds names and file
names only, so configs can import it without loading inspect-ai.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

ToolProtocol = Literal["native", "text"]
AuditToolSet = Literal["petri2", "petri3", "petri3_prefill"]
"""The sets a Petri-style audit can be run with."""
ToolSetName = Literal[AuditToolSet, "transfer"]
TOOL_PROTOCOLS: tuple[ToolProtocol, ...] = get_args(ToolProtocol)
AUDIT_TOOL_SETS: tuple[AuditToolSet, ...] = get_args(AuditToolSet)


@dataclass(frozen=True)
class ToolSet:
    """One tool set: its definitions file (in `scaffold/prompts/`), the tools it keeps from that file, the
    auditor guide that explains them, and the Petri version it follows."""

    file: str
    tools: tuple[str, ...]
    guide: str
    follows: str


_PETRI3 = (
    "set_system_message",
    "send_message",
    "resume",
    "send_tool_call_result",
    "create_tool",
    "remove_tool",
    "rollback_conversation",
    "restart_conversation",
    "end_conversation",
)

TOOL_SETS: dict[ToolSetName, ToolSet] = {
    "petri2": ToolSet(
        "tools.yaml",
        (
            "create_tool",
            "set_target_system_message",
            "send_message",
            "send_tool_call_result",
            "rollback_conversation",
            "end_conversation",
        ),
        "tool_guide_petri2.md",
        "Petri 1 and 2 (its create_target_tool is called create_tool here)",
    ),
    "petri3": ToolSet("tools_petri3.yaml", _PETRI3, "tool_guide_petri3.md", "Petri 3.1, prefill off (its default)"),
    "petri3_prefill": ToolSet(
        "tools_petri3.yaml", _PETRI3, "tool_guide_petri3.md", "Petri 3.1 with enable_prefill: resume takes a prefill"
    ),
    "transfer": ToolSet("transfer.yaml", ("sample",), "", "AuditBench's scaffold (one sampling tool), not Petri"),
}
"""Every tool set by name. `petri3` and `petri3_prefill` share one file: the prefill variant keeps
`resume`'s `prefill` argument, the other drops it."""

DEFAULT_TOOL_SET: AuditToolSet = "petri2"
TargetTools = Literal["synthetic", "fixed", "none"]
"""Petri 3's `target_tools`: the auditor creates the target's tools (`synthetic`), only answers calls to tools
the target has (`fixed`), or has no tool tools at all (`none`)."""
TARGET_TOOLS: tuple[TargetTools, ...] = get_args(TargetTools)
ROLLBACK_TOOLS = ("rollback_conversation", "restart_conversation")
TOOL_CREATION = ("create_tool", "remove_tool")
TOOL_RESULTS = ("send_tool_call_result",)


def tools_left_out(enable_rollback: bool = True, target_tools: TargetTools = "synthetic") -> tuple[str, ...]:
    """The tools an audit leaves out of its set, as Petri 3's `enable_rollback` and `target_tools` remove them."""
    left: tuple[str, ...] = ROLLBACK_TOOLS if not enable_rollback else ()
    if target_tools == "fixed":
        left += TOOL_CREATION
    elif target_tools == "none":
        left += TOOL_CREATION + TOOL_RESULTS
    return left


def prefill_allowed(tool_set: ToolSetName) -> bool:
    """Whether the auditor may prefill the target's replies in this set."""
    return tool_set in ("petri2", "petri3_prefill", "transfer")
