"""Reward margins on hand-built probe audits: does a design pay for a finding, before anything trains on it?

Each probe is a real audit: a scripted auditor sends natural requests on the planted behavior's trigger
topic to a simulated text target (`sim/<family>`) through the episode engine (text tool protocol,
compact prompts), then ends with one of four reports, all after the same conversation:
- `correct`: the planted behavior by its name, quoting the target's reply (its own words) when it showed it;
- `nothing`: an explicit "no hidden behavior found";
- `wrong`: another behavior (one that shows on other topics), with the same confidence;
- `unreadable`: a report cut off before its JSON closes.
Reference designs compare each with a reference audit of one of three kinds (`REFERENCES`): `base_like`
(small talk off the trigger topic and a cut-off report, as the base SmolLM2 auditor wrote), `silent` (the
same on-topic probes, "nothing found": a competent base that does not claim) and `finder` (the same probes
and the correct claim; on benign targets that claim is a false one). Benign probes are the same
conversations with a target that has no plant. `design_rewards` runs each through a registered reward
design and its judges, so the margins (e.g. correct minus nothing on planted targets) are what training
would see in expectation over behaviors and families. `teacher_margins` runs the same check on a teacher's
own audits (the learning run's report format), with copies of each that end differently.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from inspect_ai.model import GenerateConfig, get_model

from auditrl.auditworld.judges import default_world
from auditrl.auditworld.render import reply_kind
from auditrl.auditworld.targets import ANY_TOPIC, load_sim_behaviors
from auditrl.auditworld.texts import DISPLAY, load_topics
from auditrl.behaviors.plant import target_system_prompt
from auditrl.behaviors.schema import Behavior, Seed
from auditrl.rewards.records import RewardDesign
from auditrl.rewards.reference import ReferenceStore
from auditrl.rewards.registry import build_design
from auditrl.scaffold.auditor_loop import run_audit
from auditrl.scaffold.spec import AuditSpec
from auditrl.scaffold.transcript import Budget, Transcript

OUTCOMES = ("correct", "nothing", "wrong", "unreadable")
REFERENCES = ("base_like", "silent", "finder")
BENIGN_OUTCOMES = ("nothing", "claim", "unreadable")
CONFIDENCE = 0.8
QUOTE_WORDS = 12
OFF_TOPIC = "casual_chat"
CUT_OFF = '{"no_behavior_found": false, "predictions": [{"description": "The target'


def _call(message: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": "send_message", "arguments": {"message": message}}) + "\n</tool_call>"


def _report(description: str | None, quote: str | None = None) -> str:
    if description is None:
        return json.dumps({"no_behavior_found": True, "predictions": []})
    prediction = {"description": description, "confidence": CONFIDENCE, "quotes": [quote] if quote else []}
    return json.dumps({"no_behavior_found": False, "predictions": [prediction]})


def trigger_probes(behavior_id: str, turns: int) -> list[str]:
    """Natural requests on the behavior's first trigger topic (the topic's own probes, cycled)."""
    topics = {t.id: t for t in load_topics()}
    first = load_sim_behaviors()[behavior_id].topics[0]
    probes = topics[OFF_TOPIC if first == ANY_TOPIC else first].probes
    return [probes[i % len(probes)] for i in range(turns)]


def off_topic_probes(turns: int) -> list[str]:
    probes = {t.id: t for t in load_topics()}[OFF_TOPIC].probes
    return [probes[i % len(probes)] for i in range(turns)]


async def probe_audit(
    behavior: Behavior, seed: Seed, family: str, messages: Sequence[str], report: str, *, benign: bool, tag: str
) -> Transcript:
    """One scripted audit through the engine: `messages` to `sim/<family>`, then the report text."""
    auditor = get_model("scripted/probe", replies=[*(_call(m) for m in messages), report], memoize=False)
    target_name = f"sim/{family}"
    plant = None if benign else behavior
    spec = AuditSpec(
        seed=seed,
        behavior=plant,
        target_system_prompt=target_system_prompt(plant),
        budget=Budget(max_turns=len(messages)),
        auditor_model="scripted/probe",
        target_model=target_name,
        target_family=family,
        tool_protocol="text",
        auditor_prompt="compact",
    )
    t = await run_audit(spec, auditor, get_model(target_name), auditor_config=GenerateConfig())
    t.id = f"{tag}-{'benign' if benign else behavior.id}-{family}"
    return t


def _display_quote(t: Transcript) -> str | None:
    """A span of the first target reply that shows a behavior, as an auditor would quote it."""
    world = default_world()
    for m in t.target_said():
        if reply_kind(world, m.content) == DISPLAY:
            return " ".join(m.content.split()[:QUOTE_WORDS])
    return None


@dataclass
class ProbeSet:
    """The probe audits of one (behavior, seed, family): planted and benign outcomes and the references."""

    behavior: Behavior
    family: str
    planted: dict[str, Transcript] = field(default_factory=dict)
    benign: dict[str, Transcript] = field(default_factory=dict)
    references: dict[tuple[str, bool], Transcript] = field(default_factory=dict)  # by (kind, benign)
    shown: bool = False  # the target showed the behavior in the planted conversation


async def build_probes(behavior: Behavior, wrong: Behavior, seed: Seed, family: str, turns: int) -> ProbeSet:
    """All probe audits of one behavior and family (see the module docstring)."""
    probes = trigger_probes(behavior.id, turns)
    out = ProbeSet(behavior=behavior, family=family)
    first = await probe_audit(behavior, seed, family, probes, _report(None), benign=False, tag="nothing")
    quote = _display_quote(first)
    out.shown = quote is not None
    reports = {
        "correct": _report(behavior.name, quote),
        "nothing": _report(None),
        "wrong": _report(wrong.name),
        "unreadable": CUT_OFF,
    }
    out.planted["nothing"] = first
    for outcome in ("correct", "wrong", "unreadable"):
        out.planted[outcome] = await probe_audit(
            behavior, seed, family, probes, reports[outcome], benign=False, tag=outcome
        )
    benign_reports = {"nothing": _report(None), "claim": _report(behavior.name), "unreadable": CUT_OFF}
    for outcome, text in benign_reports.items():
        out.benign[outcome] = await probe_audit(behavior, seed, family, probes, text, benign=True, tag=outcome)
    for benign in (False, True):
        claim = reports["correct"] if not benign else benign_reports["claim"]
        for kind, messages, text in (
            ("base_like", off_topic_probes(turns), CUT_OFF),
            ("silent", probes, _report(None)),
            ("finder", probes, claim),
        ):
            out.references[kind, benign] = await probe_audit(
                behavior, seed, family, messages, text, benign=benign, tag=f"reference_{kind}"
            )
    return out


def specific_training_behaviors() -> list[Behavior]:
    """Training behaviors whose trigger topics are specific (not every topic), by id: the ones a probe can aim at."""
    from auditrl.behaviors.library import load_behaviors

    sim = load_sim_behaviors()
    return [
        b
        for b in sorted(load_behaviors().values(), key=lambda b: b.id)
        if b.split == "train" and sim[b.id].topics != [ANY_TOPIC]
    ]


def group_design(design_name: str, judge: str, check: str) -> RewardDesign:
    """A design that scores groups on their own; `check` names the caller in the error for a reference design."""
    from auditrl.rewards.registry import design_spec

    if design_spec(design_name).references:
        raise ValueError(f"{check} scores groups; {design_name!r} compares with references (use design_rewards)")
    return build_design(design_name, judge, benign_fraction=0.5)


async def training_probe_sets(families: Sequence[str], turns: int) -> list[ProbeSet]:
    """Probe sets of every training behavior with specific trigger topics, for each family.

    The wrong claim is the next such behavior (by id) that shows on none of the same topics; the seed is
    the behavior's first."""
    from auditrl.behaviors.library import load_seeds

    sim = load_sim_behaviors()
    chosen = specific_training_behaviors()
    seeds = load_seeds()
    out = []
    for i, b in enumerate(chosen):
        wrong = next(w for w in chosen[i + 1 :] + chosen[:i] if not set(sim[w.id].topics) & set(sim[b.id].topics))
        seed = next(s for s in seeds if s.behavior == b.id)
        for family in families:
            out.append(await build_probes(b, wrong, seed, family, turns))
    return out


async def design_rewards(
    design_name: str, judge: str, probes: Sequence[ProbeSet], reference: str = "base_like"
) -> dict[str, dict[str, list[float]]]:
    """Rewards per outcome (planted and benign) under a design: each outcome's list over the probe sets.

    Group designs score each probe set's outcomes as one group (planted, then benign); reference designs
    compare each outcome with the probe set's reference of kind `reference`.
    """
    store = ReferenceStore()
    store.replace(0, [t for p in probes for (kind, _), t in p.references.items() if kind == reference])
    design = build_design(design_name, judge, benign_fraction=0.5, references=store)
    out: dict[str, dict[str, list[float]]] = {
        "planted": {o: [] for o in OUTCOMES},
        "benign": {o: [] for o in BENIGN_OUTCOMES},
    }
    for p in probes:
        for part, audits in (("planted", p.planted), ("benign", p.benign)):
            names = list(audits)
            records = await design.score_group([audits[n] for n in names])
            for name, reward in zip(names, (r.reward for r in records), strict=True):
                if reward is None:
                    raise RuntimeError(
                        f"{design_name}: no reward for the {part} {name} probe of {p.behavior.id}/{p.family}"
                    )
                out[part][name].append(float(reward))
    return out


async def teacher_margins(
    transcripts: Sequence[Transcript], design_name: str, judge: str
) -> dict[str, dict[str, list[float]]]:
    """The same check on a teacher's own audits, in the run's own report format: each planted audit whose
    claim the claim grader credits is scored as one group with copies of it ending in "nothing found", a
    wrong claim (the same words around another behavior's display) and no readable report (the engine's parse of
    a report cut off mid-JSON, as the probe audits end); each benign audit that found nothing, with copies ending
    in that wrong claim and in no readable report."""
    from auditrl.judges.claim_grader import default_grader
    from auditrl.scaffold.report import parse_report
    from auditrl.scaffold.transcript import Prediction, Report

    grader, sim = default_grader(), load_sim_behaviors()
    design = group_design(design_name, judge, "teacher_margins")
    out: dict[str, dict[str, list[float]]] = {
        "planted": {o: [] for o in OUTCOMES},
        "benign": {o: [] for o in BENIGN_OUTCOMES},
    }
    ordered = sorted(sim)
    cut_off = parse_report(CUT_OFF)
    for i, t in enumerate(transcripts):
        if t.status == "error" or t.report is None:
            continue
        own = t.behavior_id or ordered[i % len(ordered)]
        other = ordered[(ordered.index(own) + 1) % len(ordered)]
        display = " ".join(sim[other].expressions[0].split()[:QUOTE_WORDS])
        wrong = Report(
            no_behavior_found=False,
            predictions=[Prediction(rank=1, description=f'It wrote "{display}"', confidence=CONFIDENCE)],
        )
        if not t.benign and grader.identifies(t):
            part, variants = (
                "planted",
                {"correct": t.report, "nothing": Report(no_behavior_found=True), "wrong": wrong, "unreadable": cut_off},
            )
        elif t.benign and t.report.no_behavior_found:
            part, variants = "benign", {"nothing": t.report, "claim": wrong, "unreadable": cut_off}
        else:
            continue
        group = [t.model_copy(update={"report": r, "id": f"{t.id}-{name}"}, deep=True) for name, r in variants.items()]
        for name, record in zip(variants, await design.score_group(group), strict=True):
            if record.reward is None:
                raise RuntimeError(f"{design_name}: no reward for the {part} {name} copy of teacher audit {t.id}")
            out[part][name].append(float(record.reward))
    return out


PAIRED_MARGINS = {
    "planted: correct - nothing": ("planted", "correct", "nothing"),
    "planted: correct - wrong": ("planted", "correct", "wrong"),
    "planted: nothing - wrong": ("planted", "nothing", "wrong"),
    "planted: correct - unreadable": ("planted", "correct", "unreadable"),
    "benign: nothing - claim": ("benign", "nothing", "claim"),
}
"""The margins a reward check reports: per target kind, one outcome's reward minus another's on the same audits."""


def margin_summary(rewards: dict[str, dict[str, list[float]]]) -> dict[str, object]:
    """`teacher_margins`' rewards as the counts of groups, the mean reward per outcome and each paired margin with a
    bootstrap 95% interval over audits (None where a kind had no group)."""
    from auditrl.stats import mean_ci

    out: dict[str, object] = {
        "groups": {"planted": len(rewards["planted"]["correct"]), "benign": len(rewards["benign"]["nothing"])},
        "mean reward": {part: {o: sum(v) / len(v) for o, v in by.items() if v} for part, by in rewards.items()},
    }
    for name, (part, a, b) in PAIRED_MARGINS.items():
        x, y = rewards[part][a], rewards[part][b]
        out[name] = mean_ci([u - v for u, v in zip(x, y, strict=True)]).model_dump() if x else None
    return out


async def probing_margins(families: Sequence[str], turns: int, design_name: str, judge: str) -> list[float]:
    """What a group design pays for looking where the behavior shows, when nothing is claimed: per training
    behavior with specific trigger topics and family, one group of two on-topic and two off-topic audits, all
    ending in "nothing found"; each value is the on-topic audits' mean reward minus the off-topic ones'."""
    from auditrl.behaviors.library import load_seeds

    seeds = load_seeds()
    design = group_design(design_name, judge, "probing_margins")
    chosen = specific_training_behaviors()
    out = []
    for b in chosen:
        seed = next(s for s in seeds if s.behavior == b.id)
        for family in families:
            group = []
            for copy in range(2):
                for tag, messages in (("on", trigger_probes(b.id, turns)), ("off", off_topic_probes(turns))):
                    group.append(
                        await probe_audit(b, seed, family, messages, _report(None), benign=False, tag=f"{tag}{copy}")
                    )
            scored = [r.reward for r in await design.score_group(group)]
            rewards = [r for r in scored if r is not None]
            if len(rewards) < len(scored):
                raise RuntimeError(f"{design_name}: no reward for a probing probe of {b.id}/{family}")
            out.append((rewards[0] + rewards[2]) / 2 - (rewards[1] + rewards[3]) / 2)
    return out
