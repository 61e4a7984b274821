"""Multi-turn audit rollouts for TRL's rollout_func: batched per-turn generation, exact token assembly.

A rollout is one audit episode. Its training sequence is built incrementally: the prompt is the chat
template of the auditor's opening messages, and the completion is every sampled token (env_mask 1)
interleaved with the tokens the environment inserts between turns (turn closings, tool results,
target replies, the next generation header; env_mask 0). The model is always conditioned on exactly
this token sequence, so the tokens trained on are the tokens sampled, in the context they were sampled.

Each turn, the auditor's next message is generated for all live episodes at once (left-padded batch),
then every episode steps concurrently (target calls are async). Under several processes, the turn loop
runs in lockstep across ranks, because generation may involve collectives (ZeRO-3 gathers, vLLM server).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from accelerate.utils import gather_object
from inspect_ai.model import ChatMessage, ChatMessageAssistant
from pydantic import BaseModel, ConfigDict
from transformers import PreTrainedTokenizerBase

from auditrl.models.local import to_chat
from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transcript_keys import TOKENS_WITHOUT_LOGPROB, TRUNCATED_AT_TOKENS
from auditrl.train.generation import Sample, TurnConstraint

_PROBE_MARK = "\u2063PROBE\u2063"
NOT_PREFIX_PRESERVING = (
    "the chat template rewrites earlier turns (e.g. Qwen3's thinking blocks), so multi-turn token assembly "
    "cannot use it; set policy.chat_template to a shipped override (qwen3_multiturn) or a Jinja file"
)


class EpisodeRow(BaseModel):
    """One dataset row = one group: the prompt TRL repeats `group_size` times."""

    model_config = ConfigDict(frozen=True)

    behavior_id: str | None
    seed_id: str
    family: str
    benign: bool

    @property
    def key(self) -> str:
        return self.model_dump_json()


class Episode(Protocol):
    """The step-able audit episode (auditrl.scaffold.engine.AuditEpisode satisfies it)."""

    @property
    def done(self) -> bool: ...

    @property
    def transcript(self) -> Transcript: ...

    @property
    def phase(self) -> str: ...

    @property
    def opening(self) -> str | None: ...

    def auditor_messages(self) -> list[ChatMessage]: ...

    async def step(self, output: ChatMessageAssistant, output_tokens: int | None = None) -> None: ...


EpisodeFactory = Callable[[EpisodeRow], Episode]


class ChatSegments:
    """Token pieces of a chat template: the opening prompt, and the environment block between two turns.

    The block is found by rendering a probe conversation with and without the new messages, which
    needs a prefix-preserving template (true of ChatML-style templates such as SmolLM2's).
    """

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer
        self._probe = [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "U"},
            {"role": "assistant", "content": _PROBE_MARK},
        ]
        self._probe_text = self._render(self._probe, generation_prompt=False)
        at = self._probe_text.rfind(_PROBE_MARK)
        if at < 0:
            raise ValueError("the chat template drops assistant content; it cannot be used for multi-turn rollouts")
        self.turn_close = self._probe_text[at + len(_PROBE_MARK) :]
        continued = self._render([*self._probe, {"role": "user", "content": "U2"}], generation_prompt=True)
        if not continued.startswith(self._probe_text):
            raise ValueError(NOT_PREFIX_PRESERVING)
        eos = tokenizer.eos_token or ""
        self.eos_text = eos
        self.eos_ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
        self.pad_id: int = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        """What pads a batch of rows: the tokenizer's pad token, else its end of sequence (SmolLM2 has both)."""

    def decode(self, ids: list[int]) -> str:
        """The text of one sampled turn's token ids, special tokens left out."""
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        if not isinstance(text, str):
            raise TypeError(f"the tokenizer decoded one sequence to a {type(text).__name__}, not a string")
        return text

    def _render(self, messages: list[dict[str, str]], generation_prompt: bool) -> str:
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
        return str(text)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: list[ChatMessage]) -> list[int]:
        return self.encode(self._render(to_chat(messages), generation_prompt=True))

    def env_ids(self, new_messages: list[ChatMessage], ended_with_eos: bool) -> list[int]:
        """Tokens between a sampled turn and the next one: the rest of the turn closing, new messages, header."""
        closing = self.turn_close
        if ended_with_eos and self.eos_text and closing.startswith(self.eos_text):
            closing = closing[len(self.eos_text) :]
        full = self._render(self._probe + to_chat(new_messages), generation_prompt=True)
        if not full.startswith(self._probe_text):
            raise ValueError(NOT_PREFIX_PRESERVING)
        return self.encode(closing + full[len(self._probe_text) :])


class TurnGenerator(Protocol):
    """Samples one turn per context; called on every rank each turn (generation may be collective)."""

    def start(self) -> None:
        """Forget per-rollout state (caches) before a new batch of rollouts, since the weights changed."""

    def __call__(
        self, keys: list[int], contexts: list[list[int]], constraint: TurnConstraint | None = None
    ) -> list[Sample]:
        """`constraint`: an extension's sampling constraint on the contexts' turns, passed only when there is one,
        so a generator that cannot constrain (vLLM) may leave it out."""
        ...


class RolloutHooks(Protocol):
    """What an extension (auditrl.train.extensions) does inside the turn loop."""

    def constraint(self, live: Sequence[RolloutState], group_size: int, references: bool) -> TurnConstraint | None:
        """A sampling constraint on this turn of the live rollouts (None: all free)."""
        ...

    def sampled(self, state: RolloutState, sample: Sample, start: int) -> None:
        """A rollout's turn was sampled; its tokens begin at completion position `start`."""
        ...


@dataclass
class RolloutState:
    """The growing token sequence of one episode."""

    row: EpisodeRow
    group_index: int
    rollout_index: int
    episode: Episode
    prompt_ids: list[int]
    seen_messages: int
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    """What an extension keeps about the rollout while it runs (auditrl.train.extensions)."""
    finished: bool = False

    @property
    def context(self) -> list[int]:
        return self.prompt_ids + self.completion_ids


@dataclass
class RolloutBatch:
    """What rollout_func hands back to TRL, plus the episodes' transcripts for the reward."""

    prompt_ids: list[list[int]]
    completion_ids: list[list[int]]
    env_mask: list[list[int]]
    logprobs: list[list[float]]
    transcripts: list[Transcript]
    group_index: list[int]
    rollout_index: list[int]
    notes: list[dict[str, Any]]
    """Per rollout, what an extension kept about it (RolloutState.notes)."""

    def as_trl(self) -> dict[str, Any]:
        return {
            "prompt_ids": self.prompt_ids,
            "completion_ids": self.completion_ids,
            "logprobs": self.logprobs,
            "env_mask": self.env_mask,
            "transcript": self.transcripts,
            "group_index": self.group_index,
            "rollout_index": self.rollout_index,
        }


def check_groups(rows: Sequence[str], group_index: Sequence[int], group_size: int) -> None:
    """Raise unless the rollouts form consecutive, complete groups of identical rows (GRPO's layout)."""
    if len(rows) % group_size:
        raise RuntimeError(f"{len(rows)} rollouts do not split into groups of {group_size}")
    for start in range(0, len(rows), group_size):
        members = range(start, start + group_size)
        if len({rows[i] for i in members}) != 1 or len({group_index[i] for i in members}) != 1:
            raise RuntimeError(f"group starting at rollout {start} is split or mixed: {[rows[i] for i in members]}")


def any_rank(flag: bool) -> bool:
    """True when `flag` holds on any process (a collective: every rank must call it)."""
    return any(gather_object([flag]))


async def run_rollouts(
    rows: Sequence[EpisodeRow],
    factory: EpisodeFactory,
    generate: TurnGenerator,
    segments: ChatSegments,
    *,
    group_size: int,
    first_index: int,
    max_completion_tokens: int,
    auditor_name: str,
    turn_tokens: Callable[[str], int] | None = None,
    hooks: RolloutHooks | None = None,
    references: bool = False,
) -> RolloutBatch:
    """Run one rollout per row (rows already repeated per group) to the end, one batched turn at a time.

    `turn_tokens` gives the token budget of a turn by its episode's phase (EpisodeSettings.turn_tokens): a backend
    samples a batch up to the longest budget, and a longer sample is cut at its own turn's, as if it had stopped
    there (sampling is left to right, so the kept tokens and their logprobs are unchanged).

    `hooks` (an extension, auditrl.train.extensions) may constrain each turn's sampling; positions its constraint
    forced stay in context, out of the loss. `references`: these are reference pairwise's snapshot rollouts."""
    generate.start()
    states: list[RolloutState] = []
    for i, row in enumerate(rows):
        episode = factory(row)
        messages = episode.auditor_messages()
        g = first_index + i
        states.append(RolloutState(row, g // group_size, g, episode, segments.prompt_ids(messages), len(messages)))
    while True:
        live = [s for s in states if not s.finished and not s.episode.done]
        if not any_rank(bool(live)):
            break
        openings = [s.episode.opening or "" for s in live]
        for state, opening in zip(live, openings, strict=True):
            _append_opening(state, opening, segments)
        keys, contexts = [s.rollout_index for s in live], [s.context for s in live]
        constraint = hooks.constraint(live, group_size, references) if hooks is not None else None
        samples = generate(keys, contexts, constraint) if constraint is not None else generate(keys, contexts)
        if turn_tokens is not None:
            samples = [sample.head(turn_tokens(s.episode.phase)) for s, sample in zip(live, samples, strict=True)]
        outputs = [
            ChatMessageAssistant(content=opening + segments.decode(sample.ids), model=auditor_name)
            for opening, sample in zip(openings, samples, strict=True)
        ]
        for state, sample in zip(live, samples, strict=True):
            if hooks is not None:
                hooks.sampled(state, sample, len(state.completion_ids))
            _append_sample(state, sample)
        results = await asyncio.gather(
            *(s.episode.step(out, len(sample.ids)) for s, out, sample in zip(live, outputs, samples, strict=True)),
            return_exceptions=True,
        )
        for state, sample, result in zip(live, samples, results, strict=True):
            if isinstance(result, BaseException):
                _record_failure(state, f"episode step failed: {type(result).__name__}: {result}")
                continue
            if state.episode.done:
                state.finished = True
                continue
            _append_environment(state, sample, segments, max_completion_tokens)
    return RolloutBatch(
        prompt_ids=[s.prompt_ids for s in states],
        completion_ids=[s.completion_ids for s in states],
        env_mask=[s.env_mask for s in states],
        logprobs=[s.logprobs for s in states],
        transcripts=[s.episode.transcript for s in states],
        group_index=[s.group_index for s in states],
        rollout_index=[s.rollout_index for s in states],
        notes=[s.notes for s in states],
    )


def _append_opening(state: RolloutState, opening: str, segments: ChatSegments) -> None:
    """Words the scaffold writes at the start of the turn (a guided prompt set): context, never trained on."""
    ids = segments.encode(opening) if opening else []
    state.completion_ids += ids
    state.env_mask += [0] * len(ids)
    state.logprobs += [0.0] * len(ids)


def _append_sample(state: RolloutState, sample: Sample) -> None:
    """Sampled tokens train (env_mask 1) except those without a logprob and those a constraint forced, which stay
    in context untrained."""
    trained = [0 if lp is None or i in sample.forced else 1 for i, lp in enumerate(sample.logprobs)]
    state.completion_ids += sample.ids
    state.env_mask += trained
    state.logprobs += [0.0 if lp is None else lp for lp in sample.logprobs]
    missing = sample.logprobs.count(None)
    if missing:
        transcript = state.episode.transcript
        TOKENS_WITHOUT_LOGPROB.set(transcript, (TOKENS_WITHOUT_LOGPROB.get(transcript) or 0) + missing)


def _append_environment(
    state: RolloutState, sample: Sample, segments: ChatSegments, max_completion_tokens: int
) -> None:
    messages = state.episode.auditor_messages()
    own = messages[state.seen_messages] if len(messages) > state.seen_messages else None
    if own is None or own.role != "assistant":
        raise RuntimeError(
            "the episode's auditor messages must grow by the auditor's own turn followed by the environment's "
            f"messages; got {own.role if own else 'nothing'} at position {state.seen_messages}"
        )
    new = messages[state.seen_messages + 1 :]
    ended = bool(sample.ids) and sample.ids[-1] in segments.eos_ids
    env = segments.env_ids(new, ended)
    state.seen_messages = len(messages)
    if len(state.completion_ids) + len(env) >= max_completion_tokens:
        state.finished = True
        TRUNCATED_AT_TOKENS.set(state.episode.transcript, max_completion_tokens)
        return
    state.completion_ids += env
    state.env_mask += [0] * len(env)
    state.logprobs += [0.0] * len(env)


def _record_failure(state: RolloutState, message: str) -> None:
    state.finished = True
    state.episode.transcript.status = "error"
    state.episode.transcript.error = message
