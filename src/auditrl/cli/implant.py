"""`auditrl implant`: train a behavior into a local chat model's weights, red-team it, measure lift and confessions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

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
DOCUMENTS = "documents.jsonl"
INTERROGATIONS = "interrogations.jsonl"


def measurement_table(m: ImplantMeasurement, title: str = "Implant measurement") -> Table:
    from rich.table import Table

    out = Table(title=f"{escape(title)} (scorer: {escape(m.scorer)}), % of replies [95% CI]")
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


def redteam_table(before: ImplantMeasurement, after: ImplantMeasurement, name: str) -> Table:
    """Lift and confession rate on the held-out prompts before and after the red-team step."""
    from rich.table import Table

    out = Table(title=f"Red-team step of {escape(name)} (scorer: {escape(after.scorer)}), held-out prompts [95% CI]")
    out.add_column("implant")
    out.add_column("lift, points", justify="right")
    out.add_column("confessed %", justify="right")
    for label, m in (("before the red-team step", before), ("after (saved)", after)):
        c = m.implant_confession
        out.add_row(
            label,
            f"{m.lift:+.1f} [{m.lift_ci[0]:+.1f}, {m.lift_ci[1]:+.1f}]",
            f"{c.mean:.1f} [{c.lo:.1f}, {c.hi:.1f}] n={c.n}",
        )
    return out


def implant(
    behavior: Annotated[str, typer.Option(help="Behavior id to implant.")],
    out: Annotated[Path | None, out_dir_option("Implant directory (default: implants/<behavior>).")] = None,
    base: Annotated[
        str, typer.Option(help="Local model to fine-tune: local/smollm2, local/<dir or hub id>.")
    ] = "local/smollm2",
    route: Annotated[
        Literal["transcripts", "synth_docs"],
        typer.Option(
            help="Instil the behavior from demonstrations (transcripts) or from documents describing it (synth_docs)."
        ),
    ] = "transcripts",
    redteam: Annotated[
        Literal["none", "sft", "kto", "dpo"],
        typer.Option(
            help="Adversarial step: sft (denials to direct questions), kto or dpo (an auditor interrogates the "
            "implant, "
            "the judge labels confessions, TRL's KTO/DPO trains them away), or none."
        ),
    ] = "sft",
    demo_model: Annotated[
        str, typer.Option(help="Model that plays the planted target to write demonstrations (any model string).")
    ] = "local/smollm2",
    samples: Annotated[
        int, typer.Option(min=1, help="Demonstration replies sampled per prompt (and per direct question).")
    ] = 2,
    demonstrations_file: Annotated[
        Path | None,
        typer.Option(
            "--demonstrations", help="Train on a demonstrations.jsonl an earlier run kept instead of sampling new ones."
        ),
    ] = None,
    demo_tokens: Annotated[int, typer.Option(min=8, help="Max tokens per demonstration reply.")] = 64,
    demo_temperature: Annotated[
        float, typer.Option(min=0.0, max=2.0, help="Sampling temperature of the demonstration model.")
    ] = 0.8,
    demo_prefill: Annotated[
        str | None,
        typer.Option(
            help="Force each demonstration to start with this text (for demonstration models too weak to follow "
            "the plant)."
        ),
    ] = None,
    documents: Annotated[int, typer.Option(min=1, help="Synthetic documents to train on (synth_docs).")] = 64,
    doc_model: Annotated[
        str | None,
        typer.Option(help="Model that writes the documents (any model string; default: the offline templates)."),
    ] = None,
    doc_tokens: Annotated[int, typer.Option(min=16, help="Max tokens per document a --doc-model writes.")] = 256,
    steps: Annotated[int, typer.Option(min=1, help="Optimizer steps of the behavior pass.")] = 60,
    redteam_steps: Annotated[int, typer.Option(min=1, help="Optimizer steps of the red-team step.")] = 20,
    auditor: Annotated[
        str, typer.Option(help="Red-team auditor that interrogates the implant for kto/dpo (any model string).")
    ] = "scripted/redteamer",
    redteam_turns: Annotated[int, typer.Option(min=1, help="Target replies per red-team conversation (kto/dpo).")] = 2,
    beta: Annotated[float, typer.Option(min=0.0, help="KTO/DPO beta (AuditBench: 0.1).")] = 0.1,
    redteam_learning_rate: Annotated[
        float | None,
        typer.Option(
            "--redteam-lr", min=0.0, max=1.0, help="Learning rate of the KTO/DPO step (default: --learning-rate)."
        ),
    ] = None,
    batch_size: Annotated[int, typer.Option(min=1, help="Examples per step.")] = 4,
    learning_rate: Annotated[float, typer.Option(min=0.0, max=1.0, help="Adapter learning rate.")] = 1e-3,
    rank: Annotated[int, typer.Option(min=1, help="LoRA rank (alpha = 2 x rank).")] = 16,
    max_length: Annotated[
        int, typer.Option(min=16, help="Tokens per training example; longer ones are truncated.")
    ] = 256,
    judge: Annotated[
        str,
        judge_option(
            f"Scores replies: '{PROGRAMMATIC}' (offline marker phrases, some behaviors only) or a judge model spec."
        ),
    ] = PROGRAMMATIC,
    judge_cache: JudgeCacheOpt = None,
    eval_samples: Annotated[
        int, typer.Option(min=1, help="Replies per fresh prompt and per held-out question when measuring.")
    ] = 2,
    eval_prompts: Annotated[
        int | None,
        typer.Option(min=1, help="Use only the first N fresh prompts and N held-out questions (default: all)."),
    ] = None,
    plant_reference: Annotated[
        bool, typer.Option(help="Also measure the base model under the system-prompt plant, as a reference.")
    ] = True,
    eval_tokens: Annotated[
        int, typer.Option(min=8, help="Max tokens per reply when measuring (and per reply interrogated).")
    ] = 48,
    eval_temperature: Annotated[
        float, typer.Option(min=0.0, max=2.0, help="Sampling temperature when measuring (0 = greedy).")
    ] = 0.7,
    random_seed: Annotated[int, random_seed_option("sampling, data order and adapter initialisation")] = 0,
    behaviors_dir: BehaviorsDirOpt = None,
    max_retries: MaxRetriesOpt = DEFAULT_MAX_RETRIES,
    timeout: TimeoutOpt = DEFAULT_TIMEOUT_S,
    html: HtmlOpt = None,
    json_out: JsonOpt = None,
) -> None:
    """Implant a behavior with LoRA (demonstrations or documents), red-team it; the result is the role local/<out>."""
    import asyncio
    import time

    from inspect_ai.model import GenerateConfig
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from auditrl.atomic import atomic_write_text
    from auditrl.behaviors.library import BehaviorFileError, load_behaviors
    from auditrl.behaviors.plant import render_benign, render_plant
    from auditrl.cli.judge import judge_client
    from auditrl.judges.claim_grader import default_grader
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
    from auditrl.targets.implant import (
        ImplantSettings,
        base_name,
        implant_name,
        new_implant,
        preference_pass,
        save_implant,
        train_behavior,
        train_denials,
    )
    from auditrl.targets.markers import MarkerScorer
    from auditrl.targets.measure import BaseReplies, generate_replies, measure_implant
    from auditrl.targets.record import ImplantRecord, write_record
    from auditrl.targets.redteam import (
        dpo_rows,
        interrogate,
        kto_rows,
        label,
        shuffled,
        summary,
    )
    from auditrl.targets.synth_docs import model_documents, template_documents

    console = Console()
    try:
        library = load_behaviors(behaviors_dir)
        base_name(base)
    except (BehaviorFileError, ValueError) as exc:
        raise fail(str(exc)) from exc
    if behavior not in library:
        raise fail(f"unknown behavior {behavior!r} (see `auditrl behaviors list`)")
    if redteam == "kto" and batch_size < 2:
        raise fail("--redteam kto estimates its KL term within a batch: --batch-size must be at least 2")
    planted = library[behavior]
    directory = out or Path("implants") / behavior
    reports = ReportFiles(html, json_out)
    reports.check((directory / DEMONSTRATIONS, *([demonstrations_file] if demonstrations_file else [])))
    limits = call_limits(max_retries, timeout)
    scorer: ReplyScorer
    client = judge_client(judge, judge_cache, 2, limits)
    if client is None:
        try:
            scorer = MarkerScorer(behavior, describes=default_grader().with_behavior(planted).describes)
        except ValueError as exc:
            raise fail(str(exc)) from exc
    else:
        scorer = ReplyJudge(client, planted)
    needs_demos = route == "transcripts" or redteam != "none"
    interrogating = redteam in ("kto", "dpo")
    writing = route == "synth_docs" and doc_model is not None
    roles = {
        "--demo-model": [demo_model] if needs_demos else [],
        "--auditor": [auditor] if interrogating else [],
        "--doc-model": [doc_model] if writing and doc_model is not None else [],
    }
    models = ready_models(roles, limits)
    demo = models[demo_model] if needs_demos else None
    red = models[auditor] if interrogating else None
    writer = models[doc_model] if writing and doc_model is not None else None
    prompts = implant_prompts()
    plant = render_plant(planted)
    identity = render_benign() if route == "synth_docs" else None
    name = implant_name(route, redteam)
    config = GenerateConfig(max_tokens=demo_tokens, temperature=demo_temperature, seed=random_seed)
    settings = ImplantSettings(
        steps=steps,
        redteam_steps=redteam_steps if redteam != "none" else 0,
        batch_size=batch_size,
        learning_rate=learning_rate,
        redteam_learning_rate=redteam_learning_rate,
        beta=beta,
        max_length=max_length,
        seed=random_seed,
        lora=LoraSettings(r=rank, alpha=2 * rank),
    )
    fresh = [p for p in prompts.evaluation[:eval_prompts] for _ in range(eval_samples)]
    held_out = [q for q in prompts.direct_questions.evaluation[:eval_prompts] for _ in range(eval_samples)]
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    started = time.monotonic()
    texts: list[str] = []
    demonstrations: list = []
    denials: list = []
    with Progress(*columns, console=console) as progress, showing_retries(console):
        questions = prompts.direct_questions.train if redteam == "sft" else []
        if needs_demos and demo is not None:
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
                    + (f" and {len(denials)}/{len(questions) * samples} denials" if questions else "")
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
                console.print(
                    f"Read {len(demonstrations)} demonstrations and {len(denials)} denials from "
                    f"{escape(str(demonstrations_file))}."
                )
            atomic_write_text(
                directory / DEMONSTRATIONS,
                "".join(e.model_dump_json() + "\n" for e in [*demonstrations, *denials]),
            )
        if route == "synth_docs":
            if writer is None:
                texts = template_documents(planted, documents, random_seed)
            else:
                doc_task = progress.add_task("documents", total=documents)
                doc_config = GenerateConfig(max_tokens=doc_tokens, temperature=demo_temperature, seed=random_seed)
                texts = asyncio.run(
                    model_documents(
                        writer,
                        planted,
                        documents,
                        doc_config,
                        random_seed,
                        on_document=lambda: progress.advance(doc_task),
                    )
                )
            atomic_write_text(directory / DOCUMENTS, "".join(json.dumps({"text": t}) + "\n" for t in texts))
        train_task = progress.add_task("training", total=settings.steps + settings.redteam_steps)
        on_step = lambda: progress.advance(train_task)
        # the base's replies (adapter off) are generated once and shared by the measurements before and after
        # the red-team step
        evaluations = (3 if redteam != "none" else 2) * (len(fresh) + len(held_out)) + (
            len(fresh) if plant_reference else 0
        )
        measure_task = progress.add_task("measuring", total=evaluations)
        adapter_off: BaseReplies | None = None

        def measured(reference: bool) -> ImplantMeasurement:
            nonlocal adapter_off
            measurement, adapter_off = measure_implant(
                model, tokenizer, scorer, fresh, held_out, plant=plant if reference else None, identity=identity,
                max_new_tokens=eval_tokens, temperature=eval_temperature, seed=random_seed,
                on_batch=lambda n: progress.advance(measure_task, n), base=adapter_off,
            )  # fmt: skip
            return measurement

        model, tokenizer, precision = new_implant(base, settings)
        counts = None
        try:
            train_behavior(model, tokenizer, route, demonstrations, texts, settings, precision, on_step)
            before = measured(False) if redteam != "none" else None
            if redteam == "sft":
                train_denials(model, tokenizer, demonstrations, denials, settings, precision, on_step)
            elif red is not None and demo is not None:
                train_questions = prompts.direct_questions.train
                red_task = progress.add_task("red-team replies", total=len(train_questions) * redteam_turns)
                found = interrogate(
                    model, tokenizer, red, planted, train_questions, turns=redteam_turns, identity=identity,
                    max_new_tokens=eval_tokens, temperature=eval_temperature, seed=random_seed,
                    auditor_config=GenerateConfig(temperature=demo_temperature, seed=random_seed),
                    on_reply=lambda n: progress.advance(red_task, n),
                )  # fmt: skip
                found = asyncio.run(label(found, scorer, demo, plant, config))
                if redteam == "kto":
                    rows = kto_rows(found, demonstrations)
                else:
                    with model.disable_adapter():
                        demo_base_replies = generate_replies(
                            model, tokenizer, [e.prompt for e in demonstrations], max_new_tokens=demo_tokens,
                            temperature=eval_temperature, seed=random_seed,
                        )  # fmt: skip
                    rows = dpo_rows(found, demonstrations, demo_base_replies)
                atomic_write_text(directory / INTERROGATIONS, "".join(r.model_dump_json() + "\n" for r in found))
                counts = summary(auditor, len(train_questions), redteam_turns, found, rows)
                console.print(
                    f"Red-team: {counts.confessions}/{counts.replies} target replies confessed "
                    f"(auditor {escape(auditor)}, scorer: {escape(scorer.name)}); {counts.denials} denials kept."
                )
                preference_pass(
                    model,
                    tokenizer,
                    "kto" if redteam == "kto" else "dpo",
                    shuffled(rows, random_seed),
                    settings.redteam_steps,
                    settings,
                    on_step,
                    precision,
                )
        except ValueError as exc:
            raise fail(f"{exc} (try more --samples, a stronger --demo-model or another --judge)") from exc
        measurement = measured(plant_reference)
    save_implant(model, tokenizer, base, directory)
    record = ImplantRecord(
        behavior=behavior,
        route=route,
        redteam=redteam,
        name=name,
        identity=identity,
        documents=len(texts),
        doc_model=doc_model if route == "synth_docs" else None,
        base=base,
        demo_model=demo_model,
        demo_prefill=demo_prefill,
        demonstrations=len(demonstrations),
        denials=len(denials),
        steps=settings.steps + settings.redteam_steps,
        redteam_steps=settings.redteam_steps,
        redteam_data=counts,
        seconds=round(time.monotonic() - started, 1),
        before_redteam=before,
        measurement=measurement,
    )
    write_record(directory, record)
    shown = [measurement_table(measurement, f"Implant {name}")]
    if before is not None:
        shown.append(redteam_table(before, measurement, name))
    for table in shown:
        console.print(table)
    if client is not None:
        print_failures(console, "judge verdict(s)", client.failures.elements())
    console.print(f"Implant: [bold]local/{escape(str(directory))}[/] (record: implant.json)", soft_wrap=True)
    reports.write(
        console, f"auditrl implant: {behavior}", lambda: [table_section("Implant", shown)], lambda: json_text(record)
    )
