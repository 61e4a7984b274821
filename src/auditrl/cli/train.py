"""`auditrl train --config FILE` (dispatch on the config's kind) and `auditrl monitor RUN`.

Also runnable as a module for multi-process launches:
`accelerate launch --config_file configs/accelerate/fsdp.yaml -m auditrl.cli train --config FILE`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from auditrl.analysis.monitors import monitor_table, read_monitors
from auditrl.cli.errors import FAILURE, fail
from auditrl.cli.options import HtmlOpt, JsonOpt, out_dir_option
from auditrl.cli.outputs import ReportFiles, json_text, table_section
from auditrl.rundir import RunDirError
from auditrl.train.monitors import MONITORS_FILE

KINDS = ("auditworld", "auditworld_sweep", "auditworld_adversarial", "grpo_lm")
console = Console()


def train(
    config: Annotated[Path, typer.Option("--config", "-c", help="Training config (YAML with a `kind:` field).")],
    out: Annotated[Path | None, out_dir_option("Run directory (default: from the config).")] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="grpo_lm: check the batch layout for the launch's world size and print the per-rank plan "
            "(generation calls, tokens, GPU memory estimate); loads and checks no model, so needs no GPU or API key.",
        ),
    ] = False,
    processes: Annotated[
        int | None,
        typer.Option("--processes", min=1, help="With --dry-run: plan for N processes instead of the launch's."),
    ] = None,
    html: HtmlOpt = None,
    json_out: JsonOpt = None,
) -> None:
    """Train: `kind: auditworld` runs the AuditWorld job, `kind: auditworld_sweep` its robustness map over
    the pairwise judge's flaws, `kind: auditworld_adversarial` co-trains auditors with targets that learn to
    conceal, `kind: grpo_lm` trains a language-model auditor."""
    from auditrl.configfile import ConfigFileError, read_kind
    from auditrl.finite import NonFiniteTrainingError

    try:
        kind = read_kind(config)
    except ConfigFileError as exc:
        raise fail(str(exc)) from exc
    if kind not in KINDS:
        raise fail(f"{config}: field 'kind' is {kind!r}; expected one of {', '.join(KINDS)}")
    reports = ReportFiles(html, json_out)
    if dry_run:
        if kind != "grpo_lm":
            raise fail(f"{config}: --dry-run plans grpo_lm runs; this config's kind is {kind!r}")
        reports.check((config,))
        _print_plan(config, processes, reports)
        return
    if html is not None or json_out is not None:
        raise fail("--html and --json write the plan of --dry-run; a training run writes its run directory instead")
    # the trainers pull in torch and TRL, so they are imported only for the kind being run; each validates
    # the whole file before it builds anything, and reports problems as ConfigFileError
    try:
        if kind == "auditworld":
            from auditrl.auditworld.job.run import run_from_config as run_world

            run_dir = run_world(config, out)
        elif kind == "auditworld_sweep":
            from auditrl.auditworld.job.sweep import run_sweep

            run_dir = run_sweep(config, out)
        elif kind == "auditworld_adversarial":
            from auditrl.auditworld.job.adversarial import run_adversarial

            run_dir = run_adversarial(config, out)
        else:
            from auditrl.cli.limits import showing_retries
            from auditrl.train.grpo import run_from_config as run_grpo

            _check_models(config)
            with showing_retries(console):  # API targets and judges (episodes.target_calls, reward.judge_calls)
                run_dir = run_grpo(config, out)
    except (ConfigFileError, RunDirError) as exc:  # a bad config, or a run directory another process is writing
        raise fail(str(exc)) from exc
    except NonFiniteTrainingError as exc:  # nothing written as a result: a diverged policy is no result
        raise fail(f"{config}: {exc}", FAILURE) from exc
    console.print(f"run directory: [bold]{escape(str(run_dir))}[/bold]")
    if kind == "grpo_lm":
        from auditrl.pages.training import write_training_page
        from auditrl.train.config import load_config
        from auditrl.train.outputs import evaluate_command, run_outputs
        from auditrl.train.runtime import is_main_process

        if is_main_process():
            write_training_page(run_dir, load_config(config))
        for what, path in run_outputs(run_dir).items():
            console.print(f"  {what}: {escape(str(path))}", highlight=False)
        console.print("Evaluate the trained auditor on the held-out suite with:", highlight=False)
        console.print(f"  {escape(evaluate_command(run_dir, load_config(config)))}", highlight=False, soft_wrap=True)


def _check_models(config: Path) -> None:
    """Every model a grpo_lm config calls (its targets, an LLM judge) passes the checks of `auditrl models check`
    before the policy loads: a missing key or local model is one line naming the field, and exit 2."""
    from auditrl.cli.limits import ready_models
    from auditrl.judges.registry import judge_family_names
    from auditrl.train.config import load_config

    cfg = load_config(config)
    episodes, reward = cfg.episodes, cfg.reward
    targets = sorted({episodes.target_model.replace("{family}", family) for family in episodes.families})
    ready_models({f"{config}: episodes.target_model": targets}, episodes.target_calls)
    if reward.judge not in judge_family_names():
        ready_models({f"{config}: reward.judge": [reward.judge]}, reward.judge_calls)


def _print_plan(config: Path, processes: int | None, reports: ReportFiles) -> None:
    from auditrl.train.config import load_config
    from auditrl.train.plan import dry_run

    try:
        plan = dry_run(load_config(config), processes)
    except ValueError as exc:  # ConfigFileError included
        raise fail(str(exc)) from exc
    console.print(plan.table)
    for warning in plan.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}", highlight=False)
    reports.write(
        console,
        f"auditrl train --dry-run: {config}",
        lambda: [table_section("Launch plan", [plan.table], [f"warning: {w}" for w in plan.warnings])],
        lambda: json_text(plan.results()),
    )


def monitor(
    run: Annotated[Path, typer.Argument(help="Run directory of a grpo_lm training run.")],
    window: Annotated[int, typer.Option(min=1, help="Steps per trend window.")] = 5,
    html: HtmlOpt = None,
    json_out: JsonOpt = None,
) -> None:
    """Print the reward-hacking monitors of a run: latest values, trend and sparkline."""
    try:
        records = read_monitors(run)
    except FileNotFoundError as exc:
        raise fail(str(exc)) from exc
    reports = ReportFiles(html, json_out)
    reports.check((run / MONITORS_FILE,))
    console.print(monitor_table(records, window=window, spark=20, meanings=console.width >= 130))
    table = monitor_table(records, window=window, spark=20, meanings=True)
    reports.write(
        console,
        f"auditrl monitor: {run}",
        lambda: [table_section("Reward-hacking monitors", [table])],
        lambda: json_text(records),
    )
