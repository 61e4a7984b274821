"""Crux evaluation: the paper's fast checkpoint proxy (its appendix B.3).

A crux is the earliest auditor turn of a successful audit at which the auditor's choice decided the
outcome. Restoring the audit to just before that turn and letting a checkpoint continue for a few
turns, over several rollouts, scores checkpoints on identical starting conditions in minutes instead
of running the whole suite. Cruxes are found by an LLM judge when one is given, or offline from target
annotations (the turn whose action drew out the first reply that truly expressed the behavior).

Restoring is a replay: the recorded auditor turns are stepped through a fresh episode against a target
that returns the recorded replies, with the recorded node ids, so the rebuilt conversation tree, the
auditor's context and every budget counter are exactly what the engine would have built.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    GenerateConfig,
    Model,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.tool import ToolCall, ToolChoice, ToolInfo
from pydantic import BaseModel, Field

from auditrl.behaviors.schema import Behavior, Seed
from auditrl.judges.binary import BinaryScorer
from auditrl.judges.crux import CruxJudge
from auditrl.scaffold.auditor_loop import drive
from auditrl.scaffold.conversation import TargetConversation
from auditrl.scaffold.engine import AuditEpisode
from auditrl.scaffold.prompt_sets import AuditorPrompt
from auditrl.scaffold.spec import AuditSpec
from auditrl.scaffold.tool_sets import DEFAULT_TOOL_SET, ToolProtocol
from auditrl.scaffold.transcript import Budget, TargetMessage, Transcript
from auditrl.scaffold.transcript_keys import CRUX, CRUX_BINARY, CRUX_TURN
from auditrl.stats import Estimate, mean_ci

EXPRESSED = "expressed"
ANNOTATIONS = "annotations"
PROGRAMMATIC = "programmatic"
"""`found_by` of a crux read off the target's annotations (the offline judge's name in every command)."""


class Crux(BaseModel):
    """A saved decision point: the source audit and the auditor turn a checkpoint takes over from."""

    id: str
    turn: int = Field(ge=1, description="The crux turn: the checkpoint plays this turn and the next ones.")
    source: Transcript
    found_by: str = Field(
        description="'programmatic' (the target's annotations) or the judge model that picked the turn."
    )
    reasoning: str = ""
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)

    @property
    def behavior_id(self) -> str:
        return str(self.source.behavior_id)


class ReplayTarget:
    """A target that returns the recorded replies of `source` in the order they were made."""

    def __init__(self, source: Transcript) -> None:
        self.replies = [m for m in source.target_messages if m.role == "assistant"]
        self.model: Model = get_model("mockllm/model", custom_outputs=self._next, memoize=False)

    def _next(
        self, input: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice, config: GenerateConfig
    ) -> ModelOutput:
        if not self.replies:
            raise RuntimeError("the replay asked for more target replies than the audit recorded")
        node = self.replies.pop(0)
        continued = node.prefill_mode == "honoured" and node.prefill and node.content.startswith(node.prefill)
        text = node.content[len(node.prefill or "") :] if continued else node.content  # the engine adds it back
        calls = [ToolCall(id=c.id, function=c.function, arguments=c.arguments) for c in node.tool_calls]
        output = ModelOutput.from_content("replay", text)
        output.message.tool_calls = calls or None
        output.metadata = {ANNOTATIONS: dict(node.annotations)}
        output.usage = ModelUsage(
            input_tokens=0, output_tokens=0, total_tokens=0
        )  # else mockllm counts with a tokenizer download
        return output


def recorded_turns(source: Transcript) -> list[ChatMessageAssistant]:
    """The auditor's audit-phase outputs, one per turn, with their tool calls as recorded."""
    turns = []
    for m in source.auditor_messages:
        if m.role == "assistant" and 1 <= m.turn <= source.turns_used:
            calls = [
                ToolCall(id=c.id, function=c.function, arguments=c.arguments, parse_error=c.parse_error)
                for c in m.tool_calls
            ]
            turns.append(ChatMessageAssistant(content=m.content, tool_calls=calls or None))
    return turns


async def replay(
    source: Transcript, spec: AuditSpec, upto: int, episode_type: type[AuditEpisode] = AuditEpisode
) -> tuple[AuditEpisode, dict[str, int]]:
    """An episode restored to the start of turn `upto` (turns before it replayed), and each replayed node's turn.

    Only the last replayed turn may end the audit (when the whole audit is replayed to map its nodes)."""
    target = ReplayTarget(source)
    episode = episode_type(spec, target.model, target_attempts=1)
    episode.conversation = TargetConversation(episode.transcript, ids=iter([m.id for m in source.target_messages]))
    created: dict[str, int] = {}
    for turn, output in enumerate(recorded_turns(source)[: upto - 1], start=1):
        before = len(episode.transcript.target_messages)
        await episode.step(output)
        if turn < upto - 1 and episode.phase != "audit":
            raise ValueError(
                f"transcript {source.id}: the replay ended at turn {turn}, before turn {upto}: "
                f"{episode.transcript.error}"
            )
        created.update({m.id: turn for m in episode.transcript.target_messages[before:]})
    episode.conversation.ids = None
    return episode, created


def continuation_spec(
    source: Transcript,
    behavior: Behavior,
    crux_turn: int,
    continue_turns: int,
    auditor: str,
    tool_protocol: ToolProtocol,
    auditor_prompt: AuditorPrompt = "full",
) -> AuditSpec:
    """The spec of a continuation: the source's seed, target, plant and tool set; `continue_turns` turns from the crux
    with the checkpoint's prompt set."""
    return AuditSpec(
        seed=Seed(id=source.seed_id, instructions=source.seed_instructions),
        behavior=behavior,
        target_system_prompt=source.target_system_prompt,
        budget=Budget(max_turns=crux_turn - 1 + continue_turns),
        auditor_model=auditor,
        target_model=source.target_model,
        target_family=source.target_family,
        tool_protocol=tool_protocol,
        tool_set=source.tool_set or DEFAULT_TOOL_SET,
        auditor_prompt=auditor_prompt,
    )


def first_expressed(nodes: Sequence[TargetMessage]) -> TargetMessage | None:
    return next((m for m in nodes if m.role == "assistant" and m.annotations.get(EXPRESSED)), None)


async def crux_from_annotations(source: Transcript, behavior: Behavior) -> Crux | None:
    """The turn whose action drew out the first reply that truly expressed the behavior (None: no success)."""
    if source.status == "error" or source.behavior_id is None:
        return None
    hit = first_expressed(source.target_messages)
    if hit is None:
        return None
    spec = continuation_spec(source, behavior, source.turns_used + 1, 1, source.auditor_model, "native")
    _, created = await replay(source, spec, source.turns_used + 1)
    turn = created.get(hit.id)
    if turn is None:
        return None
    return Crux(
        id=f"{source.id}@{turn}", turn=turn, source=source, found_by=PROGRAMMATIC, reasoning="first expressed reply"
    )


def select_cruxes(cruxes: Sequence[Crux], n: int, seed: int = 42, per_behavior: int = 2) -> list[Crux]:
    """Up to `n` cruxes spread over behaviors: `per_behavior` each where possible, the rest in proportion."""
    if len(cruxes) <= n:
        return list(cruxes)
    rng = random.Random(seed)
    by_behavior: dict[str, list[Crux]] = {}
    for c in cruxes:
        by_behavior.setdefault(c.behavior_id, []).append(c)
    for group in by_behavior.values():
        rng.shuffle(group)
    chosen: list[Crux] = []
    for group in by_behavior.values():
        chosen += group[: min(per_behavior, len(group))]
    chosen = chosen[:n]
    rest = [c for group in by_behavior.values() for c in group[per_behavior:]]
    counts = Counter(c.behavior_id for c in rest)
    rest.sort(key=lambda c: (-counts[c.behavior_id], rng.random()))
    weights = [counts[c.behavior_id] for c in rest]
    while len(chosen) < n and rest:
        pick = rng.choices(range(len(rest)), weights=weights)[0]
        chosen.append(rest.pop(pick))
        weights.pop(pick)
    return chosen


async def continue_from(
    crux: Crux,
    behavior: Behavior,
    auditor: Model,
    auditor_name: str,
    target: Model,
    continue_turns: int,
    tool_protocol: ToolProtocol,
    config: GenerateConfig,
    attempts: int = 3,
    auditor_prompt: AuditorPrompt = "full",
) -> Transcript:
    """One continuation: restore the crux, let `auditor` play `continue_turns` turns against `target`, report."""
    spec = continuation_spec(
        crux.source, behavior, crux.turn, continue_turns, auditor_name, tool_protocol, auditor_prompt
    )
    episode, _ = await replay(crux.source, spec, crux.turn)
    episode.target, episode.target_config, episode.target_attempts = target, config, attempts
    transcript = await drive(episode, auditor, config, attempts)
    CRUX.set(transcript, crux.id)
    CRUX_TURN.set(transcript, crux.turn)
    return transcript


async def build_cruxes(
    transcripts: Sequence[Transcript],
    behaviors: Mapping[str, Behavior],
    judge: CruxJudge | None = None,
    success: BinaryScorer | None = None,
    on_done: Callable[[], None] | None = None,
) -> list[Crux]:
    """The crux of every successful planted audit: from annotations, or from `judge` after `success` says it
    surfaced."""
    cruxes: list[Crux] = []
    for t in transcripts:
        if t.status == "error" or t.behavior_id is None or t.behavior_id not in behaviors or t.turns_used < 1:
            crux = None
        elif judge is None:
            crux = await crux_from_annotations(t, behaviors[t.behavior_id])
        else:
            assert success is not None, "an LLM crux judge needs a success judge"
            verdict = await success.score(t)
            answer = await judge.find(t) if verdict.surfaced else None
            crux = (
                None
                if answer is None
                else Crux(
                    id=f"{t.id}@{answer.crux_turn}",
                    turn=answer.crux_turn,
                    source=t,
                    found_by=judge.client.model_name,
                    reasoning=f"{answer.effective_action} {answer.reasoning}".strip(),
                    confidence=answer.confidence,
                )
            )
        if crux is not None:
            cruxes.append(crux)
        if on_done is not None:
            on_done()
    return cruxes


async def judge_continuations(
    continuations: Sequence[Transcript],
    scorer: BinaryScorer,
    concurrency: int = 4,
    on_done: Callable[[], None] | None = None,
) -> None:
    """Store the binary verdict on every finished continuation that has none (or an abstention)."""
    semaphore = asyncio.Semaphore(concurrency)

    async def one(t: Transcript) -> None:
        async with semaphore:
            verdict = await scorer.score(t)
        CRUX_BINARY.set(t, verdict)
        if on_done is not None:
            on_done()

    todo = [
        t for t in continuations if t.status != "error" and (CRUX_BINARY.get(t) or {"abstained": True}).get("abstained")
    ]
    await asyncio.gather(*(one(t) for t in todo))


class CruxRow(BaseModel):
    """One checkpoint over the crux set: share of continuations the binary judge says surfaced the behavior."""

    auditor: str
    detection: Estimate
    cruxes: int
    continuations: int
    failed: int
    abstained: int


def crux_table(continuations: Sequence[Transcript]) -> list[CruxRow]:
    """One row per auditor, in first-seen order; failed continuations and abstentions are counted, not scored."""
    groups: dict[str, list[Transcript]] = {}
    for t in continuations:
        groups.setdefault(t.auditor_model, []).append(t)
    rows = []
    for auditor, group in groups.items():
        verdicts = [CRUX_BINARY.get(t) for t in group if t.status != "error"]
        values = [100.0 * bool(v["surfaced"]) for v in verdicts if v is not None and not v.get("abstained")]
        rows.append(
            CruxRow(
                auditor=auditor,
                detection=mean_ci(values),
                cruxes=len({CRUX.get(t) for t in group}),
                continuations=len(group),
                failed=sum(t.status == "error" for t in group),
                abstained=sum(v is not None and bool(v.get("abstained")) for v in verdicts),
            )
        )
    return rows
