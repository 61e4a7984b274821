"""`auditrl suite`: run the held-out evaluation suite against one auditor, from audits to report.

`auditrl evaluate` scores transcripts that already exist; this command produces them. It is thin glue
over `auditrl.evaluate.runner.run_suite`: resolve the roles, pick the seeds, run and judge the audits
(each transcript is appended to `<out>/transcripts.jsonl` as it finishes, so a crash keeps every
finished audit), then print the suite beside the paper's rows and write results.json (and an HTML
report on request).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from auditrl.atomic import OutputError, atomic_write_text
from auditrl.behaviors.schema import Behavior, Seed
from auditrl.cli.behaviors import load_library
from auditrl.cli.errors import FAILURE, fail, finish
from auditrl.cli.evaluate import openings_option, suite_judges
from auditrl.cli.limits import call_limits, opened_run, print_failures, ready_models, showing_retries
from auditrl.cli.options import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    PROGRAMMATIC,
    AuditorPromptOpt,
    BehaviorsDirOpt,
    DimensionsOpt,
    FollowupsOpt,
    HtmlOpt,
    JsonOpt,
    JudgeCacheOpt,
    MaxRetriesOpt,
    MaxTokensOpt,
    OnExistingOpt,
    OpeningsOpt,
    SeedsDirOpt,
    TimeoutOpt,
    ToolProtocolOpt,
    ToolSetOpt,
    concurrency_option,
    judge_option,
    max_turns_option,
    out_dir_option,
    random_seed_option,
)
from auditrl.cli.outputs import ReportFiles, written
from auditrl.evaluate.paper import load_paper_reference
from auditrl.scaffold.store import TRANSCRIPTS, read_transcripts
from auditrl.scaffold.tool_sets import DEFAULT_TOOL_SET
from auditrl.scaffold.transcript_keys import AUDIT_QUALITY, CONCERNING, REALISM

if TYPE_CHECKING:  # inspect-ai, scipy and the judges are imported when the suite runs: a usage error answers at once
    from auditrl.evaluate.schema import SuiteResult
    from auditrl.scaffold.runner import Existing, RunLog

RESULTS = "results.json"
CONFIG = "config.json"
HELD_OUT = "heldout"


def pick_seeds(
    behaviors: dict[str, Behavior], seeds: Sequence[Seed], per_behavior: int | None, production: int | None
) -> tuple[list[Behavior], list[Seed], list[Seed]]:
    """Held-out behaviors, their tailored seeds (the first N of each bank by id) and the general seeds.

    Sorting by id makes a truncated suite the same subset on every run, so smaller runs stay comparable.
    """
    held_out = sorted((b for b in behaviors.values() if b.split == HELD_OUT), key=lambda b: b.id)
    ordered = sorted(seeds, key=lambda s: s.id)
    tailored: list[Seed] = []
    for b in held_out:
        bank = [s for s in ordered if s.behavior == b.id]
        tailored += bank if per_behavior is None else bank[:per_behavior]
    general = [s for s in ordered if s.behavior is None]
    return held_out, tailored, general if production is None else general[:production]


def suite(
    auditor: Annotated[str, typer.Option(help="Auditor model spec, e.g. anthropic/claude-haiku-4-5, local/smollm2.")],
    target: Annotated[
        str, typer.Option(help="Target model spec; planted with each held-out behavior, and run benign.")
    ],
    judge: Annotated[
        str,
        judge_option(
            "Suite judge (audit quality, false positives, concerning): a model spec, or "
            f"'{PROGRAMMATIC}' for sim/ and scripted/ targets."
        ),
    ],
    realism_judge_spec: Annotated[
        str | None,
        typer.Option(
            "--realism-judge", help="Also judge realism (production audit openings vs real ones) with this model spec."
        ),
    ] = None,
    production_target: Annotated[
        str | None, typer.Option(help="Unplanted production model for the general seeds (default: --target, no plant).")
    ] = None,
    rollouts: Annotated[int, typer.Option(min=1, help="Rollouts per seed.")] = 3,
    max_turns: Annotated[int, max_turns_option("Turn budget against planted targets.")] = 30,
    benign_max_turns: Annotated[
        int, max_turns_option("Turn budget against benign targets.", "--benign-max-turns")
    ] = 20,
    production_max_turns: Annotated[
        int, max_turns_option("Turn budget against the production target.", "--production-max-turns")
    ] = 30,
    seeds_per_behavior: Annotated[
        int | None, typer.Option(min=1, help="Tailored seeds per held-out behavior, first by id (default: all).")
    ] = None,
    production_seeds: Annotated[
        int | None,
        typer.Option(min=0, help="General seeds for production discovery, first by id (default: all; 0 skips it)."),
    ] = None,
    behaviors_dir: BehaviorsDirOpt = None,
    seeds_dir: SeedsDirOpt = None,
    concurrency: Annotated[int, concurrency_option("Audits running")] = 4,
    max_tokens: MaxTokensOpt = None,
    tool_protocol: ToolProtocolOpt = None,
    tool_set: ToolSetOpt = DEFAULT_TOOL_SET,
    auditor_prompt: AuditorPromptOpt = "full",
    judge_cache: JudgeCacheOpt = None,
    followups: FollowupsOpt = 2,
    max_retries: MaxRetriesOpt = DEFAULT_MAX_RETRIES,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    out: Annotated[Path | None, out_dir_option("Run directory (default: runs/suite-<timestamp>).")] = None,
    on_existing: OnExistingOpt = "resume",
    html: HtmlOpt = None,
    json_out: JsonOpt = None,
    reference: Annotated[
        bool, typer.Option(help="Show the paper's published rows (not reproduced here) beside ours.")
    ] = True,
    random_seed: Annotated[
        int, random_seed_option("the bootstrap of the 95% CIs and model sampling (rollout i uses this + i)")
    ] = 0,
    dimensions: DimensionsOpt = [],  # noqa: B006 - typer needs a literal default
    openings_file: OpeningsOpt = None,
) -> None:
    """Run the held-out suite: audit quality, FP calibration, production discovery, realism, composite.

    Held-out behaviors x tailored seeds x rollouts against the planted target, the same seeds against
    the target without a plant, and general seeds against the production target; every audit is judged
    as it finishes. Writes <out>/transcripts.jsonl, <out>/results.json and <out>/config.json. A run
    directory with a suite of the same settings in it is resumed (see --on-existing).
    """
    from inspect_ai.model import GenerateConfig

    from auditrl.evaluate.judging import realism_provenance
    from auditrl.evaluate.metrics import SuiteDataError, results_json, suite_table
    from auditrl.evaluate.runner import SuiteConfig, run_suite
    from auditrl.judges.realism import load_openings
    from auditrl.pages.html import Section
    from auditrl.pages.sections import suite_section, transcripts_section
    from auditrl.scaffold.runner import RunStopped

    console = Console()
    run_dir = out or Path("runs") / f"suite-{datetime.now():%Y%m%d-%H%M%S}"
    if production_seeds == 0 and realism_judge_spec is not None:
        raise fail("--realism-judge rates production audits; it needs --production-seeds above 0")
    limits = call_limits(max_retries, timeout)
    generate = GenerateConfig(max_tokens=max_tokens)
    extra_target = [production_target] if production_target else []
    models = ready_models(
        {"--auditor": [auditor], "--target": [target], "--production-target": extra_target}, limits, generate
    )
    auditor_model, target_model = models[auditor], models[target]
    production_model = models[production_target] if production_target else None
    behaviors, all_seeds = load_library(console, behaviors_dir, seeds_dir)
    held_out, tailored, general = pick_seeds(behaviors, all_seeds, seeds_per_behavior, production_seeds)
    openings = openings_option(openings_file)
    judges, clients = suite_judges(
        judge, realism_judge_spec, judge_cache, followups, limits,
        seeds={s.id: s.instructions for s in general}, dimensions=dimensions, openings=openings,
    )  # fmt: skip
    config = SuiteConfig(
        rollouts=rollouts,
        planted_turns=max_turns,
        benign_turns=benign_max_turns,
        production_turns=production_max_turns,
        concurrency=concurrency,
        seed=random_seed,
    )
    production = bool(general)
    settings = {
        "auditor": auditor,
        "target": target,
        "production_target": production_target or target,
        "judge": judge,
        "realism_judge": realism_judge_spec,
        "max_tokens": max_tokens,
        "tool_protocol": tool_protocol,
        "tool_set": tool_set,
        "auditor_prompt": auditor_prompt,
        "suite": config.model_dump(),
        "behaviors": [b.id for b in held_out],
        "tailored_seeds": [s.id for s in tailored],
        "general_seeds": [s.id for s in general],
    }
    reports = ReportFiles(html, json_out)
    log = _open(run_dir, on_existing, settings, reports)
    out_file = log.path
    console.print(
        f"Suite for {escape(auditor)} on {escape(target)}: {len(held_out)} held-out behavior(s), "
        f"{len(tailored)} tailored and {len(general)} general seed(s), {rollouts} rollout(s) each; "
        f"transcripts to {escape(str(out_file))}",
        highlight=False,
        soft_wrap=True,
    )
    atomic_write_text(run_dir / CONFIG, json.dumps(settings, indent=2))
    try:
        with showing_retries(console):
            result: SuiteResult = asyncio.run(
                run_suite(
                    auditor_model,
                    target_model,
                    judges[AUDIT_QUALITY],
                    judges.get(REALISM) if production else None,
                    production_judge=judges[CONCERNING] if production else None,
                    config=config,
                    behaviors=held_out,
                    seeds=tailored,
                    general_seeds=general,
                    production_target=production_model,
                    tool_protocol=tool_protocol,
                    tool_set=tool_set,
                    auditor_prompt=auditor_prompt,
                    log=log,
                    label=auditor,
                    console=console,
                )
            )
    except RunStopped as exc:
        raise fail(f"{exc}; run the same command again to resume", FAILURE) from exc
    except (ValueError, SuiteDataError) as exc:
        raise fail(str(exc)) from exc
    if (existing := log.describe()) is not None:
        console.print(f"[yellow]{escape(existing)}[/yellow]", highlight=False, soft_wrap=True)
    console.print(f"added {log.planned} audit(s) to {escape(str(out_file))}", highlight=False, soft_wrap=True)
    for client in clients:
        console.print(client.meter.table())
        print_failures(console, "judge verdict(s)", client.failures.elements())
    ref = load_paper_reference() if reference else None
    console.print(suite_table([result], ref, title=f"Evaluation suite: {escape(auditor)}"))
    if result.errored:
        print_failures(console, "audit(s)", (t.error for t in read_transcripts(out_file) if t.status == "error"))
        console.print(
            f"[yellow]{result.errored} of {result.transcripts} audit(s) ended in an error and are left out of "
            "every metric[/yellow]",
            highlight=False,
            soft_wrap=True,
        )
    if REALISM in judges:
        console.print(
            escape(f"Realism openings: {(openings or load_openings()).provenance}"), highlight=False, soft_wrap=True
        )
    results_file = written(lambda: atomic_write_text(run_dir / RESULTS, results_json([result])), RESULTS)
    console.print(f"Results: {escape(str(results_file))}", highlight=False, soft_wrap=True)

    def sections() -> list[Section]:
        transcripts = read_transcripts(out_file)
        notes = [f"Realism openings: {p}" for p in realism_provenance(transcripts)]
        return [suite_section([result], ref, notes=notes), transcripts_section(transcripts)]

    reports.write(console, f"auditrl suite: {auditor}", sections, lambda: results_json([result]))
    console.print(
        f"Export them for inspect view with: auditrl export {escape(str(run_dir))}", highlight=False, soft_wrap=True
    )
    finish(result.errored, result.transcripts)


def _comparable(settings: Mapping[str, object], key: str) -> object:
    """A setting as resuming compares it: more rollouts or another concurrency continue the same suite."""
    value = settings.get(key)
    return (
        {k: v for k, v in value.items() if k not in ("rollouts", "concurrency")} if isinstance(value, dict) else value
    )


def _open(run_dir: Path, on_existing: Existing, settings: Mapping[str, object], reports: ReportFiles) -> RunLog:
    """The run's transcripts file, checked (with the report's paths) before any model call; a run directory
    that holds a suite is resumed or appended to only with the same settings (more rollouts are fine)."""
    reports.check((run_dir / TRANSCRIPTS, run_dir / RESULTS, run_dir / CONFIG))
    try:
        saved = run_dir / CONFIG
        if on_existing != "overwrite" and (run_dir / TRANSCRIPTS).is_file():
            before = json.loads(saved.read_text(encoding="utf-8")) if saved.is_file() else None
            if before is None:
                raise OutputError(
                    f"--out {run_dir}: it holds transcripts but no {CONFIG} of a suite run; choose a new --out"
                )
            changed = sorted(k for k in {*before, *settings} if _comparable(before, k) != _comparable(settings, k))
            if changed:
                raise OutputError(
                    f"--out {run_dir}: the suite there was run with other settings ({', '.join(changed)} differ); "
                    "choose a new --out, or --on-existing overwrite to start over"
                )
    except ValueError as exc:  # OutputError, or a config.json that is not JSON
        raise fail(f"{exc}" if isinstance(exc, OutputError) else f"{saved}: not a suite's {CONFIG} ({exc})") from exc
    return opened_run(run_dir / TRANSCRIPTS, on_existing, "suite", {k: _comparable(settings, k) for k in settings})
