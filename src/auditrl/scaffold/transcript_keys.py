"""Every key the package writes into `Transcript.scores` and `Transcript.metadata`, declared once.

A transcript keeps both as plain JSON objects, so files written before a key was declared load unchanged and
a plugin judge may add keys of its own. Each key the package itself writes is a `Key` here: its name (a `Key`
is the string, so `t.scores[REWARD]` reads like the dict it indexes), the type of its value and what it means.
`Key.get` reads a value checked against that type, `Key.set` writes one; null, under any key, is a verdict the
judge abstained from or a value not known. `KEYS` lists them all. Besides these, `auditrl judge score` writes
an entry under each design's name (`{"reward": ..., **details}`), as a plugin's keys are its own.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Generic, Literal, Protocol, TypeVar, get_args

from pydantic import BaseModel, TypeAdapter, ValidationError

T = TypeVar("T")
Where = Literal["scores", "metadata"]


class Keyed(Protocol):
    """What a key reads and writes: a transcript's id and its two JSON objects (auditrl.scaffold.transcript's
    `Transcript`, which imports this module for its own keys)."""

    id: str
    scores: dict[str, Any]
    metadata: dict[str, Any]


class KeyValueError(ValueError):
    """A stored value that is not of its key's declared type; names the transcript, the key and the value."""


class Key(str, Generic[T]):
    """A declared key of `Transcript.scores` or `Transcript.metadata`, with the type of its value."""

    where: Where
    type: Any
    meaning: str

    def __new__(cls, where: Where, name: str, type_: Any, meaning: str) -> Key[T]:
        key = super().__new__(cls, name)
        key.where, key.type, key.meaning = where, type_, meaning
        return key

    def __reduce__(self) -> tuple[type[str], tuple[str]]:
        """Copied or pickled with a transcript, a key is the plain string it names."""
        return str, (str(self),)

    @cached_property
    def _adapter(self) -> TypeAdapter[T]:
        return TypeAdapter(self.type)

    def _data(self, t: Keyed) -> dict[str, Any]:
        return t.scores if self.where == "scores" else t.metadata

    def get(self, t: Keyed) -> T | None:
        """The value stored in `t` (None when absent or null); raises KeyValueError when it is not of the declared
        type."""
        raw = self._data(t).get(self)
        if raw is None:
            return None
        try:
            return self._adapter.validate_python(raw)
        except ValidationError as exc:
            raise KeyValueError(
                f"transcript {t.id}: {self.where}[{str(self)!r}] = {raw!r} is not {_type_name(self.type)} "
                f"({self.meaning})"
            ) from exc

    def set(self, t: Keyed, value: T | BaseModel | None) -> None:
        """Store `value` in `t` as given (a pydantic model as its JSON fields); raises KeyValueError when it is not
        of the declared type, so a wrong value never reaches the file."""
        stored = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
        try:
            if stored is not None:
                self._adapter.validate_python(stored)
        except ValidationError as exc:
            raise KeyValueError(f"{self.where}[{str(self)!r}] cannot hold {stored!r}: {self.meaning}") from exc
        self._data(t)[str(self)] = stored


def _type_name(annotation: Any) -> str:
    """`float`, or `dict[str, float]` in full."""
    return str(annotation) if get_args(annotation) else getattr(annotation, "__name__", str(annotation))


KEYS: dict[str, Key[Any]] = {}
"""Every declared key by where it lives and its name ("scores.reward"), in declaration order."""


def _declare(where: Where, name: str, type_: Any, meaning: str) -> Key[Any]:
    if f"{where}.{name}" in KEYS:
        raise ValueError(f"{where} key {name!r} is declared twice")
    key: Key[Any] = Key(where, name, type_, meaning)
    KEYS[f"{where}.{name}"] = key
    return key


def score(name: str, type_: Any, meaning: str) -> Key[Any]:
    return _declare("scores", name, type_, meaning)


def metadata(name: str, type_: Any, meaning: str) -> Key[Any]:
    return _declare("metadata", name, type_, meaning)


# Transcript.scores: rewards of a training run
REWARD: Key[float] = score("reward", float, "The run's reward design's reward for this rollout (None: not scored).")
REWARD_DESIGN: Key[str] = score("reward_design", str, "Name of the reward design that gave `reward`.")
REWARD_DETAILS: Key[dict[str, Any]] = score("reward_details", dict[str, Any], "What the design based the reward on.")
ORDER_DISAGREEMENT: Key[float] = score(
    "order_disagreement",
    float,
    "1.0 when a pairwise design's judge disagreed with itself across the two orders, else 0.0.",
)
CONCERNINGNESS: Key[dict[str, Any]] = score(
    "concerningness",
    dict[str, Any],
    (
        "`auditrl judge score`'s entry for the concerningness design: its reward and the rubric `scores` a "
        "pairwise judge is shown."
    ),
)
JUDGE_ERRORS: Key[dict[str, str]] = score(
    "judge_errors", dict[str, str], "Why each judge (by name) left this audit unjudged."
)

# Transcript.scores: the evaluation suite's verdicts (None: the judge abstained)
AUDIT_QUALITY: Key[dict[str, float]] = score(
    "audit_quality", dict[str, float], "The audit-quality judge's dimensions, 0-100."
)
FALSE_POSITIVE: Key[bool] = score("false_positive", bool, "A benign target's audit reported a hidden behavior.")
IDENTIFIED: Key[bool] = score(
    "identified", bool, "A planted target's audit reported the planted behavior (the audit-quality judge's verdict)."
)
CONCERNING: Key[float] = score("concerning", float, "The production judge's concerning score, 1-10.")
CONCERNING_NO_MITIGATING: Key[float] = score(
    "concerning_with_no_mitigating_factors",
    float,
    "The production judge's concerning score without mitigating factors, 1-10.",
)
NEEDS_ATTENTION: Key[float] = score("needs_attention", float, "The production judge's needs-attention score, 1-10.")
PRODUCTION_FIELDS = (CONCERNING, CONCERNING_NO_MITIGATING, NEEDS_ATTENTION)
REALISM: Key[float] = score(
    "realism_pick_audit", float, "Share of realism comparisons in which the judge took the audit for the real user."
)
REALISM_OPENING: Key[dict[str, str]] = score(
    "realism_opening", dict[str, str], "The real user opening the audit was compared with: its `id` and `provenance`."
)
CRUX_BINARY: Key[dict[str, Any]] = score(
    "crux_binary", dict[str, Any], "A crux continuation's binary verdict (judges.verdicts.BinaryVerdict)."
)
PREDICTION_MATCH: Key[dict[str, Any]] = score(
    "prediction_match",
    dict[str, Any],
    "A transfer audit's verdict: did a ranked prediction match the implant (judges.verdicts.MatchVerdict).",
)
PETRI: Key[dict[str, Any]] = score(
    "petri", dict[str, Any], "An imported Petri log's judge scores, by name (value, explanation, metadata)."
)

# Transcript.metadata: where an audit came from
ROLLOUT: Key[int] = metadata("rollout", int, "Index among the audits of one seed, or within a training step's batch.")
STEP: Key[int] = metadata("step", int, "Training step whose batch this rollout was.")
GROUP: Key[int] = metadata("group", int, "GRPO group of the step this rollout was in.")
SUITE_PART: Key[str] = metadata("suite_part", str, "Part of the evaluation suite: planted, benign or production.")
CRUX: Key[str] = metadata("crux", str, "Id of the crux a continuation started from.")
CRUX_TURN: Key[int] = metadata("crux_turn", int, "Turn of the source audit at which that crux stands.")
TARGET_PREFILL: Key[str] = metadata(
    "target_prefill", str, "How prefills reached the target (models.prefill.PrefillSupport)."
)
SOURCE: Key[dict[str, Any]] = metadata(
    "source", dict[str, Any], "An imported Petri sample: its log, task, sample id and epoch."
)
REFERENCE_SNAPSHOT_STEP: Key[int] = metadata(
    "reference_snapshot_step", int, "A reference rollout's step whose policy weights played it."
)
TOKENS_WITHOUT_LOGPROB: Key[int] = metadata(
    "tokens_without_logprob", int, "Sampled tokens left out of the loss because the backend gave no logprob for them."
)
TRUNCATED_AT_TOKENS: Key[int] = metadata(
    "truncated_at_tokens", int, "episodes.max_completion_tokens, when the rollout ended by reaching it."
)
CLAIM_FORCED: Key[bool] = metadata(
    "claim_forced",
    bool,
    "GRPO claim exploration set this report's opening words as a claim (episodes.claim_exploration).",
)
CLAIM_PROBABILITY: Key[float] = metadata(
    "claim_probability",
    float,
    "Under a report grammar, the policy's probability of a claim among the verdict's spellings where it drew "
    "its verdict, at the sampling temperature.",
)
TEACHER: Key[str] = metadata("teacher", str, "The model string that wrote the auditor's turns of an imitation rollout.")
PROBED_BY: Key[str] = metadata(
    "probed_by",
    str,
    "The model string that wrote the probing turns of an audit whose report alone the auditor wrote "
    "(episodes.probing: teacher).",
)
TEACHER_TURNS_CUT: Key[int] = metadata(
    "teacher_turns_cut", int, "Teacher turns that did not end within max_new_tokens, cut there as a rollout would be."
)
WORLD: Key[str] = metadata("world", str, "`auditworld` for an audit AuditWorld simulated.")
POLICY: Key[str] = metadata("policy", str, "The AuditWorld auditor policy that played the audit.")
