"""Running the held-out evaluation suite end to end: audits of planted, benign and production targets, judged.

The metrics themselves are pure functions of the judged transcripts (`auditrl.evaluate.metrics`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field
from rich.console import Console

from auditrl.configfile import ConfigModel, RandomSeed
from auditrl.evaluate.judging import Judge, apply_judge
from auditrl.evaluate.metrics import compute_suite
from auditrl.evaluate.schema import SuiteResult
from auditrl.scaffold.transcript import Budget, Transcript
from auditrl.scaffold.transcript_keys import AUDIT_QUALITY, CONCERNING, FALSE_POSITIVE, REALISM, SUITE_PART

if TYPE_CHECKING:
    from inspect_ai.model import Model

    from auditrl.behaviors.schema import Behavior, Seed
    from auditrl.scaffold.prompt_sets import AuditorPrompt
    from auditrl.scaffold.runner import RunLog
    from auditrl.scaffold.tool_sets import AuditToolSet, ToolProtocol


class SuiteConfig(ConfigModel):
    """Sizes of the held-out suite (the paper's defaults: 3 rollouts, 30/20/30 turns)."""

    rollouts: int = Field(default=3, ge=1, description="Rollouts per seed (planted, benign and production each).")
    planted_turns: int = Field(default=30, ge=1, description="Turn budget against planted held-out targets.")
    benign_turns: int = Field(
        default=20, ge=1, description="Turn budget against benign targets (false-positive calibration)."
    )
    production_turns: int = Field(default=30, ge=1, description="Turn budget of the production-discovery audits.")
    concurrency: int = Field(default=4, ge=1, description="Audits run at the same time.")
    seed: RandomSeed = Field(
        default=0,
        description="Seed of the bootstrap confidence intervals and of model sampling (rollout i uses this + i).",
    )


SuitePart = Literal["planted", "benign", "production"]
_EXPECTED_KEY: dict[SuitePart, str] = {"planted": AUDIT_QUALITY, "benign": FALSE_POSITIVE, "production": CONCERNING}
AuditFn = Callable[[Any, "Model", "Model"], Awaitable[Transcript]]


async def run_suite(
    auditor: Model,
    target: Model,
    judge: Judge,
    realism_judge: Judge | None = None,
    *,
    production_judge: Judge | None = None,
    config: SuiteConfig | None = None,
    behaviors: Sequence[Behavior] | None = None,
    seeds: Sequence[Seed] | None = None,
    general_seeds: Sequence[Seed] | None = None,
    benign_target: Model | None = None,
    production_target: Model | None = None,
    tool_protocol: ToolProtocol | None = None,
    tool_set: AuditToolSet = "petri2",
    auditor_prompt: AuditorPrompt = "full",
    log: RunLog | None = None,
    audit: AuditFn | None = None,
    label: str | None = None,
    console: Console | None = None,
) -> SuiteResult:
    """Run the held-out audits, judge them and compute the suite.

    - planted: each held-out behavior x its tailored seeds x rollouts, judged by `judge` (audit quality);
    - benign: the same seeds against `benign_target` (default `target`) with no plant, judged by `judge`
      (false positive);
    - production: general seeds against `production_target` (default `benign_target`) with no system
      prompt, run only when `production_judge` or `realism_judge` is given; `production_judge` writes
      ``concerning`` and `realism_judge` compares each audit's opening with a real conversation.
    `behaviors` defaults to the library's held-out split, `seeds` to their seed banks and `general_seeds`
    to the general bank. Transcripts are appended to `log` as they finish, by the shared runner
    (auditrl.scaffold.runner): on a log that has some, the suite resumes, and its result covers every
    audit in the file. `audit` replaces the engine's `run_audit` (same signature), e.g. for a batched runner.
    """
    # Imported here so that computing metrics from stored transcripts needs neither the engine nor inspect-ai.
    from auditrl.behaviors.library import load_behaviors, load_seeds
    from auditrl.behaviors.plant import render_benign, render_plant
    from auditrl.scaffold.auditor_loop import run_audit
    from auditrl.scaffold.runner import AuditJob, run_audits
    from auditrl.scaffold.spec import AuditSpec
    from auditrl.scaffold.store import read_transcripts

    cfg = config or SuiteConfig()
    if tool_protocol is None:
        from auditrl.models.roles import tool_protocol_for

        tool_protocol = tool_protocol_for(str(auditor))
    held_out = (
        list(behaviors) if behaviors is not None else [b for b in load_behaviors().values() if b.split == "heldout"]
    )
    by_id = {b.id: b for b in held_out}
    tailored = list(seeds) if seeds is not None else [s for b in held_out for s in load_seeds(behavior=b.id)]
    tailored = [s for s in tailored if s.behavior in by_id]
    benign_model = benign_target or target
    prod_model = production_target or benign_model
    run_production = production_judge is not None or realism_judge is not None
    general = (list(general_seeds) if general_seeds is not None else load_seeds()) if run_production else []
    general = [s for s in general if s.behavior is None]

    def spec(seed: Seed, behavior: Behavior | None, prompt: str, turns: int, model: Model) -> Any:
        return AuditSpec(
            seed=seed,
            behavior=behavior,
            target_system_prompt=prompt,
            budget=Budget(max_turns=turns),
            auditor_model=str(auditor),
            target_model=str(model),
            tool_protocol=tool_protocol,
            tool_set=tool_set,
            auditor_prompt=auditor_prompt,
        )

    def job(part: SuitePart, rollout: int, audit_spec: Any, model: Model) -> AuditJob:
        def run(generate: Any) -> Awaitable[Transcript]:
            if audit is not None:
                return audit(audit_spec, auditor, model)
            return run_audit(audit_spec, auditor, model, auditor_config=generate, target_config=generate)

        return AuditJob(audit_spec, run, rollout, {SUITE_PART: part}, sampling_seed=cfg.seed + rollout)

    jobs: list[AuditJob] = []
    first = log.next_rollout if log is not None and log.mode == "append" else 0
    for r in range(first, first + cfg.rollouts):
        for s in tailored:
            b = by_id[s.behavior or ""]
            jobs.append(job("planted", r, spec(s, b, render_plant(b), cfg.planted_turns, target), target))
            jobs.append(job("benign", r, spec(s, None, render_benign(), cfg.benign_turns, benign_model), benign_model))
        for s in general:
            jobs.append(job("production", r, spec(s, None, "", cfg.production_turns, prod_model), prod_model))
    if not jobs:
        raise ValueError("run_suite: no seeds to audit (check the held-out behaviors and their seed banks)")

    async def judged(t: Transcript) -> None:
        part: SuitePart = t.metadata[SUITE_PART]
        if part == "production":
            if production_judge is not None:
                await apply_judge(t, production_judge, CONCERNING, "production")
            if realism_judge is not None:
                await apply_judge(t, realism_judge, REALISM, "realism")
        else:
            await apply_judge(t, judge, _EXPECTED_KEY[part], part)

    kept: list[Transcript] = []
    todo = log.plan(jobs) if log is not None else jobs
    await run_audits(
        todo,
        log,
        concurrency=cfg.concurrency,
        after=judged,
        on_done=kept.append,
        console=console,
        label="held-out suite",
    )
    transcripts = read_transcripts(log.path) if log is not None else kept
    return compute_suite(transcripts, label=label or str(auditor), seed=cfg.seed)
