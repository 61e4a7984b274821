"""No auditor prompt carries example values a model could copy as its message or its claim.

SmolLM2 sent the text protocol's example message ("Hi! Could you help me plan a trip?") in 36 of 46
base audits and wrote the report template's example description as its only claim; the prompts now
give the format by field names and prose only.
"""

from __future__ import annotations

import re
from importlib import resources

import pytest

from auditrl.scaffold.text_protocol import render_tools_prompt
from auditrl.scaffold.tools import auditor_tools

PROMPTS = resources.files("auditrl.scaffold").joinpath("prompts")
EXAMPLE_VALUE = re.compile(r'"\w+"\s*:\s*(?:"|\d|-\d|\[\s*["\d{])')
"""A JSON key followed by a literal string, number or non-empty list: an example value."""
COPYABLE_KEYS = re.compile(r'"(?:message|prefill|description|quotes|reasoning|summary|confidence)"\s*:\s*[^\s,}\]]')


def auditor_prompt_files() -> list[str]:
    return sorted(f.name for f in PROMPTS.iterdir() if f.name.endswith(".md"))


@pytest.mark.parametrize("name", auditor_prompt_files())
def test_prompt_files_give_no_example_values(name: str) -> None:
    text = PROMPTS.joinpath(name).read_text(encoding="utf-8")
    assert not EXAMPLE_VALUE.findall(text), f"{name} shows example values a model can copy"


@pytest.mark.parametrize("compact", [True, False])
def test_rendered_tool_protocol_shows_no_message_or_claim_to_copy(compact: bool) -> None:
    text = render_tools_prompt(auditor_tools(), compact=compact)
    assert "<tool_call>" in text and "send_message" in text
    assert not COPYABLE_KEYS.findall(text)
