"""A language model names strategy groups contrastively and rolls them up into broader groups.

Used by codebook derivation when a naming model is given. Every call is retried; a reply that stays
malformed is an abstention (None), and the derivation then falls back to its offline method for that
group or level and says so, never inventing a name or an assignment.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Sequence
from functools import cache
from importlib import resources
from typing import TypeVar

from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser, GenerateConfig, Model

log = logging.getLogger(__name__)
T = TypeVar("T")
_NAME = re.compile(r"<name>(.*?)</name>", re.DOTALL | re.IGNORECASE)
_DESCRIPTION = re.compile(r"<description>(.*?)</description>", re.DOTALL | re.IGNORECASE)
_JSON_LIST = re.compile(r"\[.*\]", re.DOTALL)
MAX_TEXT_CHARS = 600
"""Each summary shown to the model is cut to this length, so 100 of them fit in one prompt."""


@cache
def _prompt(name: str) -> tuple[str, str]:
    text = resources.files("auditrl.analysis").joinpath(f"prompts/{name}.md").read_text(encoding="utf-8")
    system, _, user = text.partition("\n## User\n")
    return system.removeprefix("## System\n").strip(), user.strip()


def _numbered(texts: Sequence[str]) -> str:
    return "\n".join(f"{i}. {' '.join(t.split())[:MAX_TEXT_CHARS]}" for i, t in enumerate(texts, 1))


class LLMNamer:
    """Names groups from members against nearest non-members, and rolls named groups up, with a model."""

    def __init__(
        self, model: Model, label: str, concurrency: int = 8, retries: int = 2, max_tokens: int = 1500
    ) -> None:
        self.model = model
        self.label = label
        self.retries = retries
        self.config = GenerateConfig(max_tokens=max_tokens, temperature=0.0)
        self._concurrency = concurrency

    async def _ask(self, prompt: str, user: str, parse: Callable[[str], T | None]) -> T | None:
        system, _ = _prompt(prompt)
        messages: list[ChatMessage] = [ChatMessageSystem(content=system), ChatMessageUser(content=user)]
        for attempt in range(self.retries + 1):
            try:
                output = await self.model.generate(messages, config=self.config)
            except Exception as exc:  # noqa: BLE001 - network and provider errors: retry, then abstain
                log.warning("%s: naming model failed (attempt %d): %s", prompt, attempt + 1, exc)
                continue
            parsed = parse(output.completion)
            if parsed is not None:
                return parsed
            log.warning("%s: malformed naming reply (attempt %d)", prompt, attempt + 1)
        return None

    async def _name_one(
        self, members: Sequence[str], others: Sequence[str], gate: asyncio.Semaphore
    ) -> tuple[str, str] | None:
        _, user = _prompt("cluster_name")
        text = user.replace("{members}", _numbered(members)).replace("{others}", _numbered(others) or "(none)")
        async with gate:
            return await self._ask("cluster_name", text, parse_name)

    def name_groups(self, groups: Sequence[tuple[Sequence[str], Sequence[str]]]) -> list[tuple[str, str] | None]:
        """(name, description) for each (members, nearest non-members) pair; None where the model abstained."""

        async def run() -> list[tuple[str, str] | None]:
            gate = asyncio.Semaphore(self._concurrency)
            return list(await asyncio.gather(*(self._name_one(m, o, gate) for m, o in groups)))

        return asyncio.run(run())

    def roll_up(self, children: Sequence[tuple[str, str]], groups: int) -> list[int] | None:
        """The group (0..groups-1) of each child, or None when no reply assigned every child exactly once."""
        _, user = _prompt("roll_up")
        listing = "\n".join(f"{i}. {name}: {description}" for i, (name, description) in enumerate(children, 1))
        text = (
            user.replace("{groups}", str(groups)).replace("{count}", str(len(children))).replace("{children}", listing)
        )
        return asyncio.run(self._ask("roll_up", text, lambda reply: parse_roll_up(reply, len(children), groups)))


def parse_name(reply: str) -> tuple[str, str] | None:
    """(name, description) from <name> and <description> tags; None without a non-empty name."""
    name = " ".join(m.group(1).split()) if (m := _NAME.search(reply)) else ""
    description = " ".join(d.group(1).split()) if (d := _DESCRIPTION.search(reply)) else ""
    return (name, description or name) if name else None


def parse_roll_up(reply: str, children: int, groups: int) -> list[int] | None:
    """Child -> group indices from a JSON list of {"members": [1-based numbers]}; None unless a partition."""
    match = _JSON_LIST.search(reply)
    if match is None:
        return None
    try:
        data = json.loads(match.group(0))
    except json.JSONDecodeError:
        return None
    if not isinstance(data, list) or not 1 <= len(data) <= groups:
        return None
    assignment = [-1] * children
    for g, item in enumerate(data):
        members = item.get("members") if isinstance(item, dict) else None
        if not isinstance(members, list) or not members:
            return None
        for m in members:
            if not isinstance(m, int) or not 1 <= m <= children or assignment[m - 1] != -1:
                return None
            assignment[m - 1] = g
    return assignment if -1 not in assignment else None
