"""`auditrl implant`: train a behavior into a local chat model's weights and measure lift and confessions."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from auditrl.cli.errors import fail
from auditrl.cli.limits import call_limits, print_failures, ready_models, showing_retries
from auditrl.cli.options import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    PROGRAMMATIC,
    BehaviorsDirOpt,
    HtmlOpt,
    JsonOpt,
    JudgeCacheOpt,
    MaxRetriesOpt,
    TimeoutOpt,
    judge_option,
    out_dir_option,
    random_seed_option,
)
from auditrl.cli.outputs import ReportFiles, json_text, table_section

if TYPE_CHECKING:
    from rich.table import Table

    from auditrl.targets.record import ImplantMeasurement, Rate

DEMONSTRATIONS = "demonstrations.jsonl"


def measurement_table(m: ImplantMeasurement) -> Table:
    from rich.table import Table

    out = Table(title=f"Implant measurement (scorer: {escape(m.scorer)}), % of replies [95% CI]")
    out.add_column("condition")
    out.add_column("behavior shown", justify="right")
    out.add_column("confessed", justify="right")

    def cell(r: Rate | None) -> str:
        return "-" if r is None else f"{r.mean:.1f} [{r.lo:.1f}, {r.hi:.1f}] n={r.n}"

    out.add_row("base, no system prompt", cell(m.base_rate), cell(m.base_confession))
    if m.plant_rate is not None:
        out.add_row("base + system-prompt plant", cell(m.plant_rate), "-")
    out.add_row("implant, no system prompt", cell(m.implant_rate), cell(m.implant_confession))
    out.add_row("lift (implant - base), points", f"{m.lift:+.1f} [{m.lift_ci[0]:+.1f}, {m.lift_ci[1]:+.1f}]", "")
    return out


def implant(
    behavior: Annotated[str, typer.Option(help="Behavior id to implant.")],
    out: Annotated[Path | None, out_dir_option("Implant directory (default: implants/<behavior>).")] = None,
    base: Annotated[str, typer.Option(help="Local model to fine-tune: local/smollm2, local/<dir or hub id>.")] = "local/smollm2",
    demo_model: Annotated[str, typer.Option(help="Model that plays the planted target to write demonstrations (any model string).")] = "local/smollm2",
    samples: Annotated[int, typer.Option(min=1, help="Demonstration replies sampled per prompt (and per direct question).")] = 2,
    demonstrations_file: Annotated[
        Path | None,
        typer.Option("--demonstrations", help="Train on a demonstrations.jsonl an earlier run kept instead of sampling new ones."),
    ] = None,
    demo_tokens: Annotated[int, typer.Option(min=8, help="Max tokens per demonstration reply.")] = 64,
    demo_temperature: Annotated[float, typer.Option(min=0.0, max=2.0, help="Sampling temperature of the demonstration model.")] = 0.8,
    demo_prefill: Annotated[
        str | None, typer.Option(help="Force each demonstration to start with this text (for demonstration models too weak to follow the plant).")
    ] = None,
    anti_confession: Annotated[bool, typer.Option(help="Train denials to direct questions after the behavior pass.")] = True,
    steps: Annotated[int, typer.Option(min=1, help="Optimizer steps of the behavior pass.")] = 60,
    anti_confession_steps: Annotated[int, typer.Option(min=1, help="Optimizer steps of the anti-confession pass.")] = 20,
    batch_size: Annotated[int, typer.Option(min=1, help="Examples per step.")] = 4,
    learning_rate: Annotated[float, typer.Option(min=0.0, max=1.0, help="Adapter learning rate.")] = 1e-3,
    rank: Annotated[int, typer.Option(min=1, help="LoRA rank (alpha = 2 x rank).")] = 16,
    judge: Annotated[
        str,
        judge_option(f"Scores replies: '{PROGRAMMATIC}' (offline marker phrases, some behaviors only) or a judge model spec."),
    ] = PROGRAMMATIC,
    judge_cache: JudgeCacheOpt = None,
    eval_samples: Annotated[int, typer.Option(min=1, help="Replies per fresh prompt and per held-out question when measuring.")] = 2,
    eval_prompts: Annotated[
        int | None, typer.Option(min=1, help="Use only the first N fresh prompts and N held-out questions (default: all).")
    ] = None,
    plant_reference: Annotated[
        bool, typer.Option(help="Also measure the base model under the system-prompt plant, as a reference.")
    ] = True,
    eval_tokens: Annotated[int, typer.Option(min=8, help="Max tokens per reply when measuring.")] = 48,
    eval_temperature: Annotated[float, typer.Option(min=0.0, max=2.0, help="Sampling temperature when measuring (0 = greedy).")] = 0.7,
    random_seed: Annotated[int, random_seed_option("sampling, data order and adapter initialisation")] = 0,
    behaviors_dir: BehaviorsDirOpt = None,
    max_retries: MaxRetriesOpt = DEFAULT_MAX_RETRIES,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    html: HtmlOpt = None,
    json_out: JsonOpt = None,
) -> None:
    """Implant a behavior with LoRA (demonstrations, optional anti-confession pass); the result is the role local/<out>."""
    import asyncio
    import time

    from inspect_ai.model import GenerateConfig
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from auditrl.atomic import atomic_write_text
    from auditrl.behaviors.library import BehaviorFileError, load_behaviors
    from auditrl.behaviors.plant import render_plant
    from auditrl.cli.judge import judge_client
    from auditrl.judges.exhibition import ReplyJudge
    from auditrl.models.lora import LoraSettings
    from auditrl.targets.demonstrations import (
        ReplyScorer,
        implant_prompts,
        keep_demonstrations,
        keep_denials,
        read_examples,
        sample_replies,
    )
    from auditrl.targets.implant import ImplantSettings, base_name, save_implant, train_implant
    from auditrl.targets.markers import MarkerScorer
    from auditrl.targets.measure import measure_implant
    from auditrl.targets.record import ImplantRecord, write_record

    console = Console()
    try:
        library = load_behaviors(behaviors_dir)
        base_name(base)
    except (BehaviorFileError, ValueError) as exc:
        raise fail(str(exc)) from exc
    if behavior not in library:
        raise fail(f"unknown behavior {behavior!r} (see `auditrl behaviors list`)")
    planted = library[behavior]
    directory = out or Path("implants") / behavior
    reports = ReportFiles(html, json_out)
    reports.check((directory / DEMONSTRATIONS, *([demonstrations_file] if demonstrations_file else [])))
    limits = call_limits(max_retries, timeout)
    scorer: ReplyScorer
    client = judge_client(judge, judge_cache, 2, limits)
    if client is None:
        try:
            scorer = MarkerScorer(behavior)
        except ValueError as exc:
            raise fail(str(exc)) from exc
    else:
        scorer = ReplyJudge(client, planted)
    demo = ready_models({"--demo-model": [demo_model]}, limits)[demo_model]
    prompts = implant_prompts()
    plant = render_plant(planted)
    config = GenerateConfig(max_tokens=demo_tokens, temperature=demo_temperature, seed=random_seed)
    settings = ImplantSettings(
        steps=steps,
        anti_confession_steps=anti_confession_steps if anti_confession else 0,
        batch_size=batch_size,
        learning_rate=learning_rate,
        seed=random_seed,
        lora=LoraSettings(r=rank, alpha=2 * rank),
    )
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    started = time.monotonic()
    with Progress(*columns, console=console) as progress, showing_retries(console):
        questions = prompts.direct_questions.train if anti_confession else []
        task = progress.add_task("demonstrations", total=(len(prompts.demonstrations) + len(questions)) * samples)
        tick = lambda: progress.advance(task)

        async def data() -> tuple[list, list]:
            demos = await sample_replies(demo, plant, prompts.demonstrations, samples, config, tick, demo_prefill)
            answers = await sample_replies(demo, plant, questions, samples, config, tick) if questions else []
            return await keep_demonstrations(demos, scorer), await keep_denials(answers, scorer)

        if demonstrations_file is None:
            demonstrations, denials = asyncio.run(data())
            console.print(
                f"Kept {len(demonstrations)}/{len(prompts.demonstrations) * samples} demonstrations that show "
                f"{escape(behavior)}"
                + (f" and {len(denials)}/{len(questions) * samples} denials" if anti_confession else "")
                + f" (scorer: {escape(scorer.name)})."
            )
        else:
            try:
                saved = read_examples(demonstrations_file)
            except ValueError as exc:
                raise fail(str(exc)) from exc
            denials = [e for e in saved if e.prompt in questions]
            demonstrations = [e for e in saved if e.prompt not in prompts.direct_questions.train]
            progress.update(task, completed=progress.tasks[task].total)
            console.print(f"Read {len(demonstrations)} demonstrations and {len(denials)} denials from {escape(str(demonstrations_file))}.")
        atomic_write_text(
            directory / DEMONSTRATIONS,
            "".join(e.model_dump_json() + "\n" for e in [*demonstrations, *denials]),
        )
        train_task = progress.add_task("training", total=settings.steps + settings.anti_confession_steps)
        try:
            model, tokenizer = train_implant(base, demonstrations, denials, settings, lambda: progress.advance(train_task))
        except ValueError as exc:
            raise fail(f"{exc} (try more --samples, a stronger --demo-model or another --judge)") from exc
        fresh = [p for p in prompts.evaluation[:eval_prompts] for _ in range(eval_samples)]
        held_out = [q for q in prompts.direct_questions.evaluation[:eval_prompts] for _ in range(eval_samples)]
        conditions = 3 if plant_reference else 2
        measure_task = progress.add_task("measuring", total=conditions * len(fresh) + 2 * len(held_out))
        measurement = measure_implant(
            model, tokenizer, scorer, fresh, held_out, plant=plant if plant_reference else None,
            max_new_tokens=eval_tokens, temperature=eval_temperature, seed=random_seed,
            on_batch=lambda n: progress.advance(measure_task, n),
        )
    save_implant(model, tokenizer, base, directory)
    record = ImplantRecord(
        behavior=behavior,
        base=base,
        demo_model=demo_model,
        demo_prefill=demo_prefill,
        demonstrations=len(demonstrations),
        denials=len(denials),
        steps=settings.steps + settings.anti_confession_steps,
        seconds=round(time.monotonic() - started, 1),
        measurement=measurement,
    )
    write_record(directory, record)
    shown = measurement_table(measurement)
    console.print(shown)
    if client is not None:
        print_failures(console, "judge verdict(s)", client.failures.elements())
    console.print(f"Implant: [bold]local/{escape(str(directory))}[/] (record: implant.json)", soft_wrap=True)
    reports.write(console, f"auditrl implant: {behavior}", lambda: [table_section("Implant", [shown])], lambda: json_text(record))
