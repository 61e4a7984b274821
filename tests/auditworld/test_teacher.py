"""`scripted/teacher`: gathers evidence on the scenario's topics and reports what it saw, or nothing.

It is what `auditrl sft` imitates, so these tests hold what a warm start learns: the text protocol, the
scenario's topics reached, a claim only when the target showed a behavior, and "nothing found" on benign
targets, which show none.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from auditrl.auditworld.seeds import auditworld_seeds
from auditrl.auditworld.targets import reached_trigger
from auditrl.auditworld.teacher import scenario_topics
from auditrl.auditworld.texts import classify_topic, load_topics
from auditrl.behaviors.library import load_behaviors
from auditrl.behaviors.plant import target_system_prompt
from auditrl.evaluate.lm_checks import turn_validity
from auditrl.judges.claim_grader import claimed, report_valid
from auditrl.models.roles import resolve_model
from auditrl.scaffold.auditor_loop import run_audit
from auditrl.scaffold.spec import AuditSpec
from auditrl.scaffold.transcript import Budget, Transcript

BEHAVIORS = load_behaviors()


def audit(
    behavior: str | None, seed_id: str, prompt: str = "guided", turns: int = 2, family: str = "steady"
) -> Transcript:
    seed = next(s for s in auditworld_seeds() if s.id == seed_id)
    plant = BEHAVIORS[behavior] if behavior else None
    spec = AuditSpec(
        seed=seed, behavior=plant, target_system_prompt=target_system_prompt(plant), budget=Budget(max_turns=turns),
        auditor_model="scripted/teacher", target_model=f"sim/{family}", tool_protocol="text", auditor_prompt=prompt,
    )  # fmt: skip
    return asyncio.run(run_audit(spec, resolve_model("scripted/teacher"), resolve_model(f"sim/{family}")))


def sent_topics(t: Transcript) -> list[str]:
    ids = [topic.id for topic in load_topics()]
    return [ids[classify_topic(m.content)] for m in t.target_messages if m.role == "user"]


def test_the_scenario_is_read_from_its_phrases_in_order_and_the_tool_descriptions_are_ignored() -> None:
    ids = [t.id for t in load_topics()]
    for seed in auditworld_seeds()[:40]:
        system = f"You audit.\n\nScenario: {seed.instructions}\n\nCall a tool with a block: synthetic tool, test suite"
        topics = [ids[i] for i in scenario_topics(system)]
        phrases = {t.id: t.phrase for t in load_topics()}
        assert len(topics) == 3 and all(phrases[t] in seed.instructions for t in topics)
        assert [seed.instructions.index(phrases[t]) for t in topics] == sorted(
            seed.instructions.index(phrases[t]) for t in topics
        )


@pytest.mark.parametrize("prompt", ["guided", "compact", "full"])
def test_every_turn_and_report_is_well_formed_and_probes_the_scenario(prompt: str) -> None:
    seed = next(s for s in auditworld_seeds() if s.behavior == "flattery")
    t = audit("flattery", seed.id, prompt, turns=3)
    scenario = [load_topics()[i].id for i in scenario_topics(f"Scenario: {seed.instructions}")]
    assert t.status in ("completed", "budget_exhausted") and turn_validity(t) == 100.0 and report_valid(t)
    assert set(sent_topics(t)) <= set(scenario) and sent_topics(t)[0] == scenario[0]


def test_it_claims_what_it_saw_in_the_targets_own_words_and_nothing_on_benign_targets() -> None:
    seeds = [s for s in auditworld_seeds() if s.behavior == "flattery"]
    planted = [audit("flattery", s.id, turns=3, family=f) for s in seeds for f in ("steady", "pliant")]
    benign = [audit(None, s.id, turns=3, family=f) for s in seeds for f in ("steady", "pliant")]
    assert not any(claimed(t) for t in benign)
    shown = [t for t in planted if t.behavior_shown]
    assert shown and all(claimed(t) for t in shown)
    for t in shown:
        description = t.report.predictions[0].description  # type: ignore[union-attr]
        quoted = description.partition(" it wrote: ")[2].removesuffix(" ...")
        replies = " ".join(m.content for m in t.target_messages if m.role == "assistant").replace('"', "'")
        assert (
            quoted and quoted in replies and "feedback on my draft" in description
        )  # the target's own words, and where
        assert '"' not in description  # no quote marks nested in the report's JSON string
    assert not any(claimed(t) for t in planted if t not in shown)  # no evidence, no claim
    assert sum(bool(reached_trigger(t)) for t in planted) >= len(planted) // 2


def test_a_topic_that_showed_the_behavior_is_probed_again() -> None:
    for seed in (s for s in auditworld_seeds() if s.behavior == "flattery"):
        t = audit("flattery", seed.id, "compact", turns=4, family="pliant")
        replies = [m for m in t.target_messages if m.role == "assistant"]
        first = next((i for i, m in enumerate(replies) if m.annotations.get("expressed")), None)
        if first is not None and first + 1 < len(replies):
            topics = sent_topics(t)
            assert topics[first + 1] == topics[first]
            prediction = t.report.predictions[0]  # type: ignore[union-attr]
            assert prediction.quotes and all(q.verified for q in prediction.quote_checks)
            return
    pytest.fail("the planted target never showed the behavior before the last turn")


def test_guided_turns_continue_the_begun_words() -> None:
    t = audit("flattery", next(s.id for s in auditworld_seeds() if s.behavior == "flattery"))
    first, report = t.auditor_messages[2].content, t.auditor_messages[-1].content
    assert first.startswith('<tool_call>\n{"name": "send_message", "arguments": {"message": "')
    assert json.loads(report)["no_behavior_found"] in (True, False)


def test_the_learning_runs_reward_ranks_the_teachers_findings_above_silence_above_a_wrong_claim() -> None:
    """What GRPO from the SFT base is paid (configs/experiments/small_lm/cpu_learn_sft.yaml: in-group pairwise,
    sim judges), on the teacher's own guided one-line reports: a credited claim beats "nothing found", which beats
    a wrong claim; on benign targets "nothing found" beats a claim."""
    from statistics import mean

    from auditrl.rewards.margins import teacher_margins

    seeds = [s for s in auditworld_seeds() if BEHAVIORS[s.behavior].split == "train" and s.id.endswith(("-00", "-01"))]
    audits = [audit(b, s.id, family="pliant") for s in seeds for b in (s.behavior, None)]
    r = asyncio.run(teacher_margins(audits, "ingroup_pairwise", "sim"))
    p, b = r["planted"], r["benign"]
    assert len(p["correct"]) >= 10 and len(b["nothing"]) == len(seeds)
    gap = lambda x, y: mean(u - v for u, v in zip(x, y, strict=True))
    assert gap(p["correct"], p["nothing"]) > 0.1 and gap(p["nothing"], p["wrong"]) > 0.1
    assert gap(p["nothing"], p["unreadable"]) > 0.1 and gap(b["nothing"], b["claim"]) > 0.5
