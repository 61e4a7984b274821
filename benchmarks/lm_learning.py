"""The language-model auditor's learning result in one command: the untrained base, the SFT base (`auditrl sft`
on a config's training distribution) and the SFT base after GRPO (`auditrl train` from its adapter), each
auditing the same held-out AuditWorld targets, planted and benign.

Two held-out parts, neither trained on: the 6 held-out behaviors (their AuditWorld seeds), and the held-out
seeds (`data.heldout_seeds`) of the training behaviors. Each audit runs with the config's episode settings
(prompt set, turns, tokens per turn, temperature) against `sim/<first family>`. Per auditor and part:
- valid tool-call rate: audit turns whose reply holds a tool call, all well-formed;
- valid report rate: audits whose report parsed;
- reached trigger: planted audits that raised a trigger topic of the planted behavior at all;
- claim rate, planted and benign: reports that claim a behavior (as the claim grader reads them, a lenient repair
  such as a missing confidence allowed; `valid report rate` counts the repairs); discrimination is their difference;
- identification: planted audits whose report describes the planted behavior, by the claim grader the
  reward's judges use (auditrl.judges.claim_grader);
- FP calibration: benign audits whose report says "nothing found" (an unreadable report is not calibrated).
Means with 95% intervals over (seed, planted or benign) units; discrimination's interval is a bootstrap of the
planted minus benign units, and each trained auditor's difference from the one before it is a bootstrap too.
With `--probing teacher` GRPO trains report writing alone (episodes.probing: teacher: the config's scripted
teacher writes the probing turns, the policy only the report), and every part is audited twice, as whole audits
and with the teacher probing ("<part>, teacher probing"), which measures the report writing itself.
Also the GRPO run's training reward and claim rates by third of the run. Prints the CPU (its bf16 support
decides the dtype) and CPU seconds of each phase; writes `<out>/lm_learning.json`, the SFT run under
`<out>/sft`, the GRPO run under `<out>/grpo` and the evaluation transcripts under `<out>/eval/<auditor>/`.
Rerunning on the same `--out` resumes: finished audits are kept, GRPO resumes from its last checkpoint. `--auditor`
evaluates some of the three auditors only (and runs only the stages they need), so that separate processes can share
the work on a machine's cores; a last call with all three (and `--skip-sft`) finds everything on disk and prints the
tables with every change.

    OMP_NUM_THREADS=1 python benchmarks/lm_learning.py \
        [--episodes 256 --epochs 3 --finding-repeats 4 --verdict-weight 1] \
        [--grpo-steps 40 --grpo-learning-rate 1e-3] [--reward-design binary] [--probing teacher] [--part behaviors]
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from statistics import mean
from typing import Annotated, Any, get_args

import torch
import typer
import yaml
from inspect_ai.model import GenerateConfig, Model
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from auditrl.atomic import atomic_write_text
from auditrl.auditworld.seeds import auditworld_seeds
from auditrl.auditworld.targets import reached_trigger
from auditrl.behaviors.library import load_behaviors
from auditrl.behaviors.plant import target_system_prompt
from auditrl.behaviors.schema import Seed
from auditrl.configfile import load_yaml
from auditrl.evaluate.lm_checks import rollouts_by_third, turn_validity
from auditrl.experiments.small_lm.choice_sft import SmallLMSFTSettings, run_experiment_sft
from auditrl.experiments.small_lm.settings import SmallLMSettings, load_run_config, small_lm
from auditrl.judges.claim_grader import claimed, default_grader, found_nothing, report_valid
from auditrl.models.precision import describe_cpu
from auditrl.models.roles import resolve_model
from auditrl.rewards.margins import margin_summary, teacher_margins
from auditrl.scaffold.auditor_loop import run_audit
from auditrl.scaffold.spec import AuditSpec
from auditrl.scaffold.store import TRANSCRIPTS, append_transcript, read_transcripts
from auditrl.scaffold.transcript import Budget, Transcript
from auditrl.scaffold.transcript_keys import ROLLOUT
from auditrl.stats import difference_ci, mean_ci
from auditrl.train.config import GRPOLMConfig, RewardSettings
from auditrl.train.episodes import split_seeds
from auditrl.train.outputs import ADAPTER_DIR
from auditrl.train.sft import RECORD_FILE as SFT_RECORD
from auditrl.train.sft import TEACHER_TRANSCRIPTS

AUDITORS = ("untrained base", "SFT base", "SFT + GRPO")
"""The auditors the benchmark evaluates, in order; each change is from the one before it."""
PARTS = ("behaviors", "seeds")
"""The held-out parts by their second word: held-out behaviors, held-out seeds of training behaviors."""
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "experiments" / "small_lm" / "cpu_learn_sft.yaml"
DISCRIMINATION = "discrimination (planted - benign)"
PROBING = get_args(SmallLMSettings.model_fields["probing"].annotation)
TEACHER_PROBED = ", teacher probing"
"""Suffix of a held-out part audited with the teacher probing and the auditor writing only the report."""
console = Console(width=160)


def held_out_audits(
    cfg: GRPOLMConfig, heldout_seeds: int, training_seeds: int, rollouts: int, kinds: Sequence[str] = PARTS
) -> dict[str, list[tuple[str, Seed, int]]]:
    """(behavior, seed, rollout) of each part; every one is audited planted and benign."""
    behaviors = load_behaviors()
    seeds = auditworld_seeds()
    heldout = sorted(b for b, v in behaviors.items() if v.split == "heldout")
    _, unseen = split_seeds([s for s in seeds if s.behavior not in heldout], cfg.data.heldout_seeds)
    first = {s.behavior: int(s.id[-2:]) for s in reversed(unseen)}  # each behavior's first held-out seed number
    parts = {
        "held-out behaviors": [s for s in seeds if s.behavior in heldout and int(s.id[-2:]) < heldout_seeds],
        "held-out seeds of training behaviors": [
            s for s in unseen if int(s.id[-2:]) - first[s.behavior] < training_seeds
        ],
    }
    parts = {part: chosen for part, chosen in parts.items() if part.split()[1] in kinds}
    return {part: [(str(s.behavior), s, r) for s in chosen for r in range(rollouts)] for part, chosen in parts.items()}


async def audit_all(
    cfg: GRPOLMConfig,
    auditor: Model,
    spec: str,
    audits: list[tuple[str, Seed, int]],
    out: Path,
    prober: tuple[str, Model] | None = None,
) -> list[Transcript]:
    behaviors = load_behaviors()
    family = cfg.episodes.families[0]
    target = resolve_model(f"sim/{family}")
    settings = cfg.episodes
    config = GenerateConfig(temperature=settings.temperature, top_p=settings.top_p, max_tokens=settings.max_new_tokens)
    report_config = config.merge(GenerateConfig(max_tokens=settings.report_tokens))
    done = (
        {(t.behavior_id, t.seed_id, t.metadata.get(ROLLOUT)) for t in read_transcripts(out)} if out.exists() else set()
    )
    for benign in (False, True):
        for behavior, seed, rollout in audits:
            plant = None if benign else behaviors[behavior]
            if (plant.id if plant else None, seed.id, rollout) in done:
                continue
            audit_spec = AuditSpec(
                seed=seed, behavior=plant, target_system_prompt=target_system_prompt(plant),
                budget=Budget(max_turns=settings.max_turns), auditor_model=spec, target_model=f"sim/{family}",
                target_family=family, tool_protocol="text", auditor_prompt=settings.auditor_prompt,
            )  # fmt: skip
            transcript = await run_audit(
                audit_spec, auditor, target, auditor_config=config, prober=prober, report_config=report_config
            )
            ROLLOUT.set(transcript, rollout)
            append_transcript(out, transcript)
    return read_transcripts(out)


def units(transcripts: list[Transcript], value: Any) -> dict[tuple[str, str], float]:
    """Per-(seed, planted or benign) means of `value(t)` (None = not counted): rollouts of one seed are not
    independent."""
    groups: dict[tuple[str, str], list[float]] = {}
    for t in transcripts:
        v = value(t)
        if v is not None:
            groups.setdefault((t.seed_id or "", "benign" if t.benign else "planted"), []).append(100.0 * float(v))
    return {key: mean(g) for key, g in groups.items()}


def unit_metrics(transcripts: list[Transcript]) -> dict[str, dict[tuple[str, str], float]]:
    grader = default_grader()
    ok = [t for t in transcripts if t.status != "error"]
    planted, benign = [t for t in ok if not t.benign], [t for t in ok if t.benign]
    return {
        "valid tool-call rate": units(ok, lambda t: None if (v := turn_validity(t)) is None else v / 100.0),
        "valid report rate": units(ok, report_valid),
        "reached trigger (planted)": units(planted, reached_trigger),
        "claim rate, planted": units(planted, claimed),
        "claim rate, benign": units(benign, claimed),
        "identification (planted)": units(planted, grader.identifies),
        "FP calibration (benign)": units(benign, found_nothing),
    }


def summary(rows: dict[str, dict[tuple[str, str], float]], transcripts: list[Transcript]) -> dict[str, Any]:
    out: dict[str, Any] = {k: mean_ci(list(v.values())).model_dump() for k, v in rows.items() if v}
    if rows["claim rate, planted"] and rows["claim rate, benign"]:
        planted, benign = list(rows["claim rate, planted"].values()), list(rows["claim rate, benign"].values())
        out[DISCRIMINATION] = difference_ci(planted, benign).model_dump()
    out["audits"] = sum(t.status != "error" for t in transcripts)
    out["failed"] = sum(t.status == "error" for t in transcripts)
    return out


def paired_change(
    after: dict[str, dict[tuple[str, str], float]], before: dict[str, dict[tuple[str, str], float]]
) -> dict[str, Any]:
    """Per metric, after minus before over the units both have, with a bootstrap 95% interval (discrimination:
    the change in planted claims minus the change in benign claims)."""
    deltas = {m: [v - before[m][k] for k, v in values.items() if k in before[m]] for m, values in after.items()}
    out: dict[str, Any] = {m: mean_ci(d).model_dump() for m, d in deltas.items() if d}
    if deltas["claim rate, planted"] and deltas["claim rate, benign"]:
        out[DISCRIMINATION] = difference_ci(deltas["claim rate, planted"], deltas["claim rate, benign"]).model_dump()
    return out


def reward_check(cfg: GRPOLMConfig, teacher: Path) -> dict[str, Any]:
    """Before GRPO: does the run's reward rank the teacher's correct claims above "nothing found" above a wrong
    claim, in the run's own report format (auditrl.rewards.margins.teacher_margins)?"""
    check = margin_summary(asyncio.run(teacher_margins(read_transcripts(teacher), cfg.reward.design, cfg.reward.judge)))
    table = Table(
        title=f"reward check on the teacher's audits ({cfg.reward.design}, judge {cfg.reward.judge}): "
        "paired margins, mean [95% CI]"
    )
    for column in ("margin", "mean [95% CI]"):
        table.add_column(column, justify="right")
    for name in ("planted: correct - nothing", "planted: nothing - wrong", "benign: nothing - claim"):
        table.add_row(name, cell(check[name], signed=True, digits=3))
    console.print(table)
    if any(
        (e := check[n]) is None or e["mean"] <= 0 for n in ("planted: correct - nothing", "planted: nothing - wrong")
    ):
        console.print(
            "[bold red]warning:[/] this reward does not rank a finding above silence above a wrong claim",
            highlight=False,
        )
    return check


def grpo_config(
    cfg_path: Path,
    out: Path,
    adapter: Path,
    steps: int,
    design: str,
    learning_rate: float,
    claim_exploration: float = 0.0,
    probing: str = "auditor",
) -> Path:
    """The config's GRPO run, starting from the SFT adapter, written beside the run (`auditrl train` reads it)."""
    raw = load_yaml(cfg_path.read_text(encoding="utf-8"))
    raw["experiment"] = {
        **(raw.get("experiment") or {"name": "small_lm"}),
        "claim_exploration": claim_exploration,
        "probing": probing,
    }
    raw["policy"]["init_adapter"] = str(adapter.resolve())
    raw["trainer"]["max_steps"] = steps
    raw["reward"]["design"] = design
    raw["trainer"]["learning_rate"] = learning_rate
    path = out / "grpo_config.yaml"
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, yaml.safe_dump(raw, sort_keys=False))
    return path


def pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def cell(e: dict[str, Any] | None, signed: bool = False, digits: int = 1) -> str:
    if not e:
        return "-"
    f = f"{'+' if signed else ''}.{digits}f"
    return f"{e['mean']:{f}} [{e['lo']:{f}}, {e['hi']:{f}}]"


def main(
    config: Annotated[
        Path, typer.Option(help="The grpo_lm config whose training distribution SFT imitates and GRPO trains on.")
    ] = CONFIG,
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("runs/lm-learning"),
    episodes: Annotated[int, typer.Option(help="Teacher audits.")] = 256,
    epochs: Annotated[float, typer.Option(help="SFT epochs.")] = 3.0,
    learning_rate: Annotated[float, typer.Option(help="SFT learning rate.")] = 1e-3,
    finding_repeats: Annotated[
        int, typer.Option(help="Times SFT trains on each teacher audit that identifies the planted behavior.")
    ] = 4,
    verdict_weight: Annotated[
        float, typer.Option(help="SFT loss weight of each report's verdict word (1: every trained token alike).")
    ] = 1.0,
    grpo_steps: Annotated[
        int | None,
        typer.Option(help="GRPO steps from the SFT base (default: the config's trainer.max_steps; 0: no GRPO)."),
    ] = None,
    grpo_learning_rate: Annotated[
        float | None, typer.Option(help="GRPO learning rate (default: the config's trainer.learning_rate).")
    ] = None,
    claim_exploration: Annotated[
        float,
        typer.Option(help="Share of each GRPO group whose report verdict is a claim (episodes.claim_exploration)."),
    ] = 0.0,
    probing: Annotated[
        str,
        typer.Option(
            help="Who writes GRPO's probing turns (episodes.probing): `auditor`, or `teacher` (the config's "
            "probing_teacher; the policy writes only the report, and each held-out part is also audited so)."
        ),
    ] = "auditor",
    heldout_seeds: Annotated[int, typer.Option(help="AuditWorld seeds per held-out behavior.")] = 4,
    training_seeds: Annotated[
        int, typer.Option(help="Of each training behavior's held-out seeds, how many to audit.")
    ] = 1,
    rollouts: Annotated[int, typer.Option(help="Rollouts per seed, planted and benign.")] = 1,
    reward_design: Annotated[
        str | None, typer.Option(help="GRPO's reward design (default: the config's reward.design).")
    ] = None,
    skip_sft: Annotated[bool, typer.Option(help="Use the adapter an earlier call wrote under <out>/sft.")] = False,
    part: Annotated[
        list[str],
        typer.Option(help="Held-out part to audit: `behaviors`, `seeds` (of training behaviors); repeatable."),
    ] = list(PARTS),  # noqa: B006 - typer reads the default here; nothing mutates it
    auditor: Annotated[
        list[str],
        typer.Option(
            help="Auditor to evaluate: `untrained base`, `SFT base`, `SFT + GRPO`; repeatable. SFT runs only for the "
            "last two, GRPO only for the last."
        ),
    ] = list(AUDITORS),  # noqa: B006 - typer reads the default here; nothing mutates it
) -> None:
    if probing not in PROBING:
        raise typer.BadParameter(f"{probing!r}: choose from {', '.join(PROBING)}", param_hint="--probing")
    if unknown := set(part) - set(PARTS):
        raise typer.BadParameter(
            f"unknown part(s) {sorted(unknown)}; choose from {', '.join(PARTS)}", param_hint="--part"
        )
    if unknown := set(auditor) - set(AUDITORS):
        raise typer.BadParameter(
            f"unknown auditor(s) {sorted(unknown)}; choose from {', '.join(AUDITORS)}", param_hint="--auditor"
        )
    torch.set_num_threads(1)
    torch.manual_seed(0)
    console.print(describe_cpu(), highlight=False)
    cfg = load_run_config(config)
    if reward_design is not None:
        try:
            cfg = cfg.model_copy(
                update={"reward": RewardSettings.model_validate({**cfg.reward.model_dump(), "design": reward_design})}
            )
        except ValidationError as exc:
            raise typer.BadParameter(str(exc), param_hint="--reward-design") from exc
    steps = cfg.trainer.max_steps if grpo_steps is None else grpo_steps
    lr = cfg.trainer.learning_rate if grpo_learning_rate is None else grpo_learning_rate
    if not lr > 0:
        raise typer.BadParameter(f"{lr} is not a positive learning rate", param_hint="--grpo-learning-rate")
    record: dict[str, Any] = {
        "cpu": describe_cpu(), "config": config.name, "reward_design": cfg.reward.design, "grpo_steps": steps,
        "grpo_learning_rate": lr, "claim_exploration": claim_exploration, "probing": probing, "cpu_seconds": {},
    }  # fmt: skip
    sft_dir = out / "sft"
    if not skip_sft and {"SFT base", "SFT + GRPO"} & set(auditor):
        run_experiment_sft(
            cfg,
            SmallLMSFTSettings(
                episodes=episodes,
                epochs=epochs,
                learning_rate=learning_rate,
                finding_repeats=finding_repeats,
                verdict_weight=verdict_weight,
            ),
            sft_dir,
        )
    if (sft_dir / SFT_RECORD).exists():  # this call's SFT run or an earlier call's
        sft = json.loads((sft_dir / SFT_RECORD).read_text(encoding="utf-8"))
        record["cpu_seconds"]["sft"] = sft["cpu_seconds"]["total"]
        record["sft"] = {
            "kept": sft["kept"],
            "examples": sft["examples"],
            "teacher": sft["teacher"],
            "loss": [sft["loss"][0]["loss"], sft["loss"][-1]["loss"]],
        }
        console.print(
            f"SFT: {sft['kept']} teacher audits ({sft['examples']} examples), "
            f"loss {sft['loss'][0]['loss']:.3f} -> {sft['loss'][-1]['loss']:.3f}, "
            f"{record['cpu_seconds']['sft']:.0f} CPU s; teacher: {json.dumps(sft['teacher'])}",
            highlight=False,
        )
    if cfg.reward.judge == "sim":
        if (sft_dir / TEACHER_TRANSCRIPTS).exists():
            record["reward_check"] = reward_check(cfg, sft_dir / TEACHER_TRANSCRIPTS)
        else:
            console.print(
                f"reward check: no teacher audits in {sft_dir / TEACHER_TRANSCRIPTS} yet (SFT writes them)",
                highlight=False,
            )
    parts = held_out_audits(cfg, heldout_seeds, training_seeds, rollouts, part)
    if probing == "teacher":
        parts |= {f"{name}{TEACHER_PROBED}": audits for name, audits in parts.items()}
    teacher = (small_lm(cfg).probing_teacher, resolve_model(small_lm(cfg).probing_teacher))
    record["results"], record["changes"] = {}, {}
    evaluated: dict[str, dict[str, Any]] = {}

    def evaluate(label: str, spec: str) -> None:
        """Audit every held-out part with one auditor; its change from the auditor evaluated before it."""
        model = resolve_model(spec, dtype=cfg.policy.dtype)
        for part_name, audits in parts.items():
            started = time.process_time()
            folder = (
                out
                / "eval"
                / label.replace(" ", "_").replace("+", "plus")
                / part_name.replace(",", "").replace(" ", "_")
            )
            prober = teacher if part_name.endswith(TEACHER_PROBED) else None
            transcripts = asyncio.run(audit_all(cfg, model, spec, audits, folder / TRANSCRIPTS, prober))
            record["cpu_seconds"][f"{label}: {part_name}"] = time.process_time() - started
            rows = unit_metrics(transcripts)
            record["results"].setdefault(part_name, {})[label] = summary(rows, transcripts)
            if (previous := evaluated.get(part_name)) is not None:
                record["changes"].setdefault(part_name, {})[f"{label} - {previous['label']}"] = paired_change(
                    rows, previous["rows"]
                )
            evaluated[part_name] = {"label": label, "rows": rows}
            console.print(
                f"{label}, {part_name}: {len(transcripts)} audits, {time.process_time() - started:.0f} CPU s",
                highlight=False,
            )
            atomic_write_text(out / "lm_learning.json", json.dumps(record, indent=2))

    if "untrained base" in auditor:
        evaluate("untrained base", f"local/{cfg.policy.model}")
    if "SFT base" in auditor:
        evaluate("SFT base", f"local/{sft_dir / ADAPTER_DIR}")
    if steps > 0 and "SFT + GRPO" in auditor:
        from auditrl.experiments.small_lm.extension import SmallLMExtension
        from auditrl.train.grpo import run_from_config

        started = time.process_time()
        grpo_path = grpo_config(
            config, out, sft_dir / ADAPTER_DIR, steps, cfg.reward.design, lr, claim_exploration, probing
        )
        grpo_dir = run_from_config(grpo_path, out / "grpo", extension=SmallLMExtension(load_run_config(grpo_path)))
        record["cpu_seconds"]["grpo"] = time.process_time() - started
        record["grpo_training"] = rollouts_by_third(read_transcripts(grpo_dir / TRANSCRIPTS))
        console.print(f"GRPO: {steps} steps, {record['cpu_seconds']['grpo']:.0f} CPU s", highlight=False)
        evaluate("SFT + GRPO", f"local/{grpo_dir / ADAPTER_DIR}")
    print_tables(record)


def print_tables(record: dict[str, Any]) -> None:
    if thirds := record.get("grpo_training"):
        table = Table(title="GRPO training rollouts by third of the run (0-100; reward: mean [95% CI] over rollouts)")
        columns = ("steps", "rollouts", "valid reports", "claims, planted", "claims, benign", "reward", "forced claims",
                   "forced claim reward, planted", "free reward, planted", "forced claim reward, benign")  # fmt: skip
        for column in columns:
            table.add_column(column, justify="right")
        for t in thirds:
            reward = t["reward"] and f"{t['reward']['mean']:.3f} [{t['reward']['lo']:.3f}, {t['reward']['hi']:.3f}]"
            rewards = [
                t.get(k) for k in ("forced_claim_reward_planted", "free_reward_planted", "forced_claim_reward_benign")
            ]
            table.add_row(
                t["steps"],
                str(t["rollouts"]),
                pct(t["valid_reports"]),
                pct(t["claims_planted"]),
                pct(t["claims_benign"]),
                reward or "-",
                str(t.get("forced_claims", 0)),
                *["-" if r is None else f"{r:.3f}" for r in rewards],
            )
        console.print(table)
    for part_name, by_label in record["results"].items():
        changes = record["changes"].get(part_name, {})
        table = Table(
            title=f"{part_name} (0-100, mean [95% CI] over (seed, planted or benign) units)", caption=record["cpu"]
        )
        table.add_column("metric")
        for label in (*by_label, *changes):
            table.add_column(label, justify="right")
        for metric in next(iter(by_label.values())):
            if metric in ("audits", "failed"):
                continue
            table.add_row(
                metric,
                *[cell(r.get(metric)) for r in by_label.values()],
                *[cell(c.get(metric), signed=True) for c in changes.values()],
            )
        table.add_row(
            "audits (failed)", *[f"{r['audits']} ({r['failed']})" for r in by_label.values()], *["" for _ in changes]
        )
        console.print(table)


if __name__ == "__main__":
    typer.run(main)
