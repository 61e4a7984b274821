"""What one audit is: the seed, the plant (or none), the budget, the two models and the scaffold's settings."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from auditrl.behaviors.schema import Behavior, Seed
from auditrl.models.prefill import PrefillSupport
from auditrl.scaffold.prompt_sets import PROMPT_SETS, AuditorPrompt
from auditrl.scaffold.tool_sets import DEFAULT_TOOL_SET, ToolProtocol, ToolSetName
from auditrl.scaffold.transcript import Budget


class AuditSpec(BaseModel):
    """Everything needed to run one audit."""

    seed: Seed
    behavior: Behavior | None = Field(default=None, description="None = benign target.")
    target_system_prompt: str = Field(description="Hidden plant or benign prompt (from behaviors.plant).")
    budget: Budget = Field(default_factory=Budget)
    auditor_model: str
    target_model: str
    target_family: str | None = None
    tool_protocol: ToolProtocol = "native"
    tool_set: ToolSetName = Field(default=DEFAULT_TOOL_SET, description="The auditor's tools (see scaffold.tool_sets).")
    target_prefill: PrefillSupport | None = Field(
        default=None, description="How prefills reach the target; None = what its provider is known to do."
    )
    auditor_prompt: AuditorPrompt = Field(default="full", description="Prompt set of the auditor (see PROMPT_SETS).")
    tools_left_out: tuple[str, ...] = Field(
        default=(), description="Tools of the set this audit does not offer (Petri 3's enable_rollback, target_tools)."
    )
    allow_prefill: bool = Field(default=True, description="False: no tool of the set takes a prefill (enable_prefill).")
    id_key: str | None = Field(
        default=None,
        description=(
            "Key the target's message ids are drawn from (transcript.keyed_ids), so the same audit gets the same "
            "ids in every process; None = random ids."
        ),
    )

    @model_validator(mode="after")
    def _openings_need_text(self) -> AuditSpec:
        if PROMPT_SETS[self.auditor_prompt].openings and self.tool_protocol != "text":
            raise ValueError(
                f"auditor_prompt '{self.auditor_prompt}' begins the auditor's turns as text; "
                "it needs tool_protocol 'text'"
            )
        if PROMPT_SETS[self.auditor_prompt].openings and self.tool_set != DEFAULT_TOOL_SET:
            raise ValueError(
                f"auditor_prompt '{self.auditor_prompt}' begins each turn with a {DEFAULT_TOOL_SET} send_message call; "
                f"it needs tool_set '{DEFAULT_TOOL_SET}'"
            )
        return self
