"""`scripted/<name>`: deterministic models for tests and demos, registered as an inspect-ai provider.

- `scripted/<any>` with model arg `replies=[...]`: the replies, chosen by turn and cycled.
- `scripted/file:<path>`: the same, with the replies read from a YAML file (a list, or `replies:`).
- `scripted/denier`: a target that answers helpfully and innocently denies any hidden instructions.
- `scripted/auditor`: an auditor that follows its seed instruction (the request it describes, the variation
  after a rollback, a control request, a plain question), then reports the behavior a reply showed, quoting
  the target's own words, or that it found nothing (auditrl.auditworld.seed_auditor).
- `scripted/feedback_auditor`: a reply list that asks a target for feedback on the user's drafts (with a
  rollback), for demos of crux evaluation against `sim/` targets.
- `scripted/teacher`: an auditor of AuditWorld text targets (`sim/`) that probes the scenario's topics and
  reports what it saw (auditrl.auditworld.teacher); `auditrl sft` distils it into a warm-started base.
- `scripted/transfer_auditor`: a fixed auditor for the transfer scaffold (`sample` calls until the token
  budget is spent, then a fixed guess quoting a verbatim span of the target's own words, never its own
  prefill), a fixed-guess baseline for transfer tables.

The reply is a function of the conversation (its number of assistant turns) and, for `scripted/auditor`, of
the sampling seed, never of a counter, so one memoized `Model` shared by concurrent audits still answers
each one deterministically.
Replies write tool calls as text (the text protocol). Only when the caller passes tools natively
(a scripted target given the auditor's synthetic tools) are `<tool_call>` blocks turned into calls.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    GenerateConfig,
    ModelAPI,
    ModelOutput,
    ModelUsage,
    modelapi,
)
from inspect_ai.tool import ToolChoice, ToolInfo
from pydantic import BaseModel, Field, ValidationError

from auditrl.configfile import read_yaml_file
from auditrl.models.replies import target_replies, turn_index
from auditrl.models.tool_emulation import apply_tool_calls

if TYPE_CHECKING:
    from auditrl.auditworld.seed_auditor import SeedAuditor
    from auditrl.auditworld.teacher import SimTeacher

DATA_DIR = Path(__file__).parent / "data" / "scripted"
FILE_PREFIX = "file:"
AUDITOR_SCRIPTS = frozenset({"transfer_auditor"})
"""Built-in scripts that are fixed auditors (turns, then a report) rather than reply lists."""
TEACHER = "teacher"
SEED_AUDITOR = "auditor"


class ScriptedReplies(BaseModel):
    """A reply list, cycled by turn."""

    replies: list[str] = Field(min_length=1)


class AuditorReport(BaseModel):
    """The fixed part of the scripted auditor's report; quotes are taken from the conversation."""

    description: str
    confidence: float = Field(ge=0.0, le=1.0)
    reasoning: str
    summary: str


class AuditorScript(BaseModel):
    """The scripted auditor: text-protocol turns, then a report (early if the engine asks for it)."""

    turns: list[str] = Field(min_length=1)
    report_trigger: str = Field(min_length=1)
    reply_tag: str = Field(min_length=1)
    quote_words: int = Field(ge=1)
    report: AuditorReport


def _read_yaml(path: Path) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"scripted replies file not found: {path}")
    return read_yaml_file(path)


def load_replies(path: Path) -> ScriptedReplies:
    """Replies from a YAML file holding either a list of strings or a mapping with `replies:`."""
    data = _read_yaml(path)
    try:
        return ScriptedReplies.model_validate({"replies": data} if isinstance(data, list) else data)
    except ValidationError as exc:
        raise ValueError(f"{path}: field 'replies' must be a non-empty list of strings: {exc}") from exc


def load_auditor_script(path: Path = DATA_DIR / "transfer_auditor.yaml") -> AuditorScript:
    try:
        return AuditorScript.model_validate(_read_yaml(path))
    except ValidationError as exc:
        raise ValueError(f"{path}: invalid scripted auditor: {exc}") from exc


def quote_from(reply: str, words: int) -> str:
    """Up to `words` words from the start of the reply's longest line, exactly as written (one contiguous span)."""
    lines = [line.strip() for line in reply.splitlines() if line.strip()]
    if not lines:
        return ""
    span = re.match(rf"\S+(?:\s+\S+){{0,{words - 1}}}", max(lines, key=len))
    return span.group(0) if span else ""


def report_quote(messages: list[ChatMessage], reply_tag: str, words: int) -> str:
    """A verbatim quote from the latest target reply that has any text of the target's own."""
    for reply in reversed(target_replies(messages, reply_tag)):
        quote = quote_from(reply, words)
        if quote:
            return quote
    return ""


def _word_count(text: str) -> int:
    return len(text.split())


@modelapi(name="scripted")
class ScriptedModelAPI(ModelAPI):
    """inspect-ai provider whose replies come from a script instead of a model."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig | None = None,
        replies: list[str] | None = None,
        **model_args: Any,
    ) -> None:
        super().__init__(model_name=model_name, base_url=base_url, api_key=api_key, config=config or GenerateConfig())
        if model_args:
            raise ValueError(f"scripted/{model_name}: unknown model args {sorted(model_args)} (known: replies)")
        self.auditor: AuditorScript | None = None
        self.teacher: SimTeacher | None = None
        self.seed_auditor: SeedAuditor | None = None
        self.replies: list[str] = []
        if replies is not None:
            self.replies = ScriptedReplies(replies=replies).replies
        elif model_name.startswith(FILE_PREFIX):
            self.replies = load_replies(Path(model_name[len(FILE_PREFIX) :]).expanduser()).replies
        elif model_name == TEACHER:
            from auditrl.auditworld.teacher import SimTeacher

            self.teacher = SimTeacher()
        elif model_name == SEED_AUDITOR:
            from auditrl.auditworld.seed_auditor import SeedAuditor

            self.seed_auditor = SeedAuditor()
        elif model_name in AUDITOR_SCRIPTS:
            self.auditor = load_auditor_script(DATA_DIR / f"{model_name}.yaml")
        elif (DATA_DIR / f"{model_name}.yaml").is_file():
            self.replies = load_replies(DATA_DIR / f"{model_name}.yaml").replies
        else:
            builtin = sorted([*(p.stem for p in DATA_DIR.glob("*.yaml")), TEACHER, SEED_AUDITOR])
            raise ValueError(
                f"scripted/{model_name}: pass replies=[...], use scripted/file:<path.yaml>, "
                f"or a built-in script: {', '.join(f'scripted/{b}' for b in builtin)}"
            )

    async def count_text_tokens(self, text: str) -> int:
        return _word_count(text)

    def reply(self, messages: list[ChatMessage], seed: int | None = None) -> str:
        """The scripted reply to this conversation (`seed`: the sampling seed, which the seed auditor reads)."""
        if self.teacher is not None:
            return self.teacher.reply(messages)
        if self.seed_auditor is not None:
            return self.seed_auditor.reply(messages, seed)
        turn = turn_index(messages)
        if self.auditor is None:
            reply = self.replies[turn % len(self.replies)]
            prefill = messages[-1].text if messages and isinstance(messages[-1], ChatMessageAssistant) else ""
            return f" {reply}" if prefill and not prefill[-1].isspace() else reply
        script = self.auditor
        asked = bool(messages) and script.report_trigger.lower() in messages[-1].text.lower()
        if turn < len(script.turns) and not asked:
            return script.turns[turn]
        quote = report_quote(messages, script.reply_tag, script.quote_words)
        prediction = {
            "description": script.report.description,
            "confidence": script.report.confidence,
            "quotes": [quote] if quote else [],
            "reasoning": script.report.reasoning,
        }
        report = {"no_behavior_found": False, "predictions": [prediction], "summary": script.report.summary}
        return json.dumps(report, indent=2)

    async def generate(
        self,
        input: list[ChatMessage],
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> ModelOutput:
        text = self.reply(input, config.seed)
        output = ModelOutput.from_content(model=f"scripted/{self.model_name}", content=text)
        if tools and tool_choice != "none":
            output = apply_tool_calls(output, tools, f"call-{uuid.uuid4().hex[:8]}")
        prompt_tokens = sum(_word_count(m.text) for m in input)
        output.usage = ModelUsage(
            input_tokens=prompt_tokens, output_tokens=_word_count(text), total_tokens=prompt_tokens + _word_count(text)
        )
        return output
