"""What a prefill means on each provider: continued, emulated, or refused; never two messages glued.

A prefill is the start of the target's reply, written by the auditor. Three ways to honour it:

- `continue`: the target continues the final assistant message as its own words. In-process models
  (`local/`, `scripted/`, `sim/`) and Anthropic's API do this natively; vLLM and SGLang servers do it
  when the request carries `continue_final_message: true, add_generation_prompt: false`, which is
  sent to them (and to `openai-api/` servers declared `continue`). The reply is prefill + continuation.
- `emulate`: for APIs that always answer with a new message (OpenAI, Google, and by default any
  `openai-api/` server, whose support is unknown), the target is asked in an extra user turn to begin
  its reply with the prefill verbatim. A reply that does so is recorded as prefill + the rest; one that
  does not is recorded as it stands, without the prefill, and the auditor is told.
- `refuse`: the call is refused with a tool error to the auditor, and nothing is sent.

Every target message records which happened (`TargetMessage.prefill_mode`), and only text the target
generated after the prefill counts as its own words for quotes and judges.
"""

from __future__ import annotations

from typing import Literal

from auditrl.models.capabilities import provider_info
from auditrl.models.roles import provider_of
from auditrl.scaffold.transcript import PrefillMode

PrefillSupport = Literal["continue", "emulate", "refuse"]
"""How prefills are carried out for a target (see the module docstring)."""

PREFILL_SUPPORTS: tuple[PrefillSupport, ...] = ("continue", "emulate", "refuse")

CONTINUE_FLAG_BODY = {"continue_final_message": True, "add_generation_prompt": False}
"""vLLM's request fields for continuing the final assistant message (also read by SGLang)."""


def prefill_support(spec: str, declared: PrefillSupport | None = None) -> PrefillSupport:
    """How prefills reach the target `spec`: `declared` if given, else what its provider is known to do."""
    if declared is not None:
        return declared
    return "emulate" if provider_info(provider_of(spec)).prefill == "emulate" else "continue"


def continue_body(spec: str) -> dict[str, bool]:
    """Extra request fields that make `spec` continue a final assistant message (empty where not needed)."""
    return {} if provider_info(provider_of(spec)).prefill == "continue" else dict(CONTINUE_FLAG_BODY)


def describe_support(spec: str, declared: PrefillSupport | None = None) -> str:
    """One line for headers and `models check`: how prefills work on this target, and why."""
    support = prefill_support(spec, declared)
    handling = provider_info(provider_of(spec)).prefill
    if declared is not None:
        why = "declared"
    elif handling == "continue":
        why = "native"
    elif handling == "continue_flag":
        why = "continue_final_message"
    else:
        why = "the API answers with a new message; declare `continue` for servers with continue_final_message"
    return f"{support} ({why})"


def apply_prefill(
    prefill: str | None, text: str, support: PrefillSupport
) -> tuple[str, str | None, PrefillMode | None]:
    """The reply's content, the prefill it starts with (None if none) and what became of the prefill.

    A continued prefill is the start of the reply, unless the reply itself begins with the prefill again
    (a server that answered with a new message although asked to continue): then it is not glued twice.
    An emulated one counts only if the target began its reply with it (leading space aside); otherwise
    the reply is kept as the target wrote it.
    """
    if not prefill:
        return text, None, None
    begun = text.lstrip()
    repeated = bool(prefill.strip()) and begun.startswith(prefill.strip())
    if support == "continue":
        return (begun, prefill.strip(), "honoured") if repeated else (f"{prefill}{text}", prefill, "honoured")
    if repeated:
        return begun, prefill.strip(), "emulated"
    return text, None, "ignored"
