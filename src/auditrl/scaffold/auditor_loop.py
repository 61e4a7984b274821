"""The plain loop around an `AuditEpisode`: ask the auditor model for each turn until the episode is done.

A trainer batches auditor generation across episodes instead and calls `AuditEpisode.step` itself; this
loop is what every other caller (audit commands, the suite, cruxes, Inspect tasks) runs.
"""

from __future__ import annotations

from inspect_ai.model import ChatMessageAssistant, GenerateConfig, Model

from auditrl.models.prefill import apply_prefill, continue_body, prefill_support
from auditrl.models.retries import ModelCallFailed, call_model
from auditrl.scaffold.engine import AuditEpisode
from auditrl.scaffold.spec import AuditSpec
from auditrl.scaffold.transcript import Transcript


async def run_audit(
    spec: AuditSpec,
    auditor: Model,
    target: Model,
    *,
    auditor_config: GenerateConfig | None = None,
    target_config: GenerateConfig | None = None,
    attempts: int = 3,
    episode_type: type[AuditEpisode] = AuditEpisode,
    prober: tuple[str, Model] | None = None,
    report_config: GenerateConfig | None = None,
) -> Transcript:
    """Run one audit to the end (report included); a model call that fails within its limits ends it as "error".

    `attempts` and the models' call limits bound each call (see `auditrl.models.retries.call_model`);
    `episode_type` picks the scaffold (Petri's six tools by default; see `scaffold.transfer`); `prober`
    (spec, model) writes every turn before the report, the auditor only the report; `report_config` is the
    report turn's own config (a longer token budget), `auditor_config` elsewhere.
    """
    episode = episode_type(spec, target, target_config=target_config, target_attempts=attempts)
    return await drive(episode, auditor, auditor_config or GenerateConfig(), attempts, prober, report_config)


async def drive(
    episode: AuditEpisode,
    auditor: Model,
    config: GenerateConfig,
    attempts: int = 3,
    prober: tuple[str, Model] | None = None,
    report_config: GenerateConfig | None = None,
) -> Transcript:
    """Generate the auditor's turns until `episode` is done (it may start mid-audit, e.g. restored from a crux);
    with a `prober` (spec, model), it writes the turns before the report and the auditor the report alone."""
    for spec in dict.fromkeys([episode.spec.auditor_model, *(prober[:1] if prober else [])]):
        if episode.opening is not None and prefill_support(spec) != "continue":
            raise ValueError(
                f"auditor_prompt '{episode.spec.auditor_prompt}' needs an auditor that continues a begun reply; "
                f"'{spec}' does not (use 'compact')"
            )
    while not episode.done:
        speaker, model = prober if prober and episode.phase != "report" else (episode.spec.auditor_model, auditor)
        own = report_config if report_config is not None and episode.phase == "report" else config
        messages, turn_config, opening = episode.auditor_messages(), own, episode.opening
        if opening is not None:
            messages.append(ChatMessageAssistant(content=opening))
            if body := continue_body(speaker):
                turn_config = own.merge(GenerateConfig(extra_body={**(own.extra_body or {}), **body}))
        try:
            output = await call_model(
                model,
                messages,
                tools=episode.tools,
                tool_choice=episode.tool_choice,
                config=turn_config,
                attempts=attempts,
                role="auditor",
            )
        except ModelCallFailed as e:
            episode.fail(str(e))
            break
        if opening is None:
            await episode.step(output)
            continue
        usage = output.usage.output_tokens if output.usage is not None else None
        content, _, _ = apply_prefill(opening, output.message.text, "continue")
        await episode.step(ChatMessageAssistant(content=content, model=output.model), usage)
    return episode.transcript
