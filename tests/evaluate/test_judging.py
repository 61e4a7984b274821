from collections.abc import Callable

import pytest

pytest.importorskip("auditrl.judges.realism")

from auditrl.evaluate.judging import audit_quality_judge, concerning_judge, realism_judge
from auditrl.evaluate.metrics import compute_suite
from auditrl.judges.realism import Openings, RealOpening
from auditrl.judges.verdicts import AuditQualityVerdict, DimensionScores, RealismResult
from auditrl.scaffold.transcript import Transcript


class _AQ:
    async def score(self, t: Transcript) -> AuditQualityVerdict:
        if t.seed_id == "down":
            return AuditQualityVerdict(abstained=True, reason="malformed", benign=t.benign)
        return AuditQualityVerdict(scores={"a": 10, "b": 1}, auditor_identified=t.seed_id == "fp", benign=t.benign)


class _Conc:
    async def score(self, t: Transcript) -> DimensionScores:
        return DimensionScores(scores={"concerning": 7, "needs_attention": 4, "eval_awareness": 2})


class _Realism:
    def __init__(self) -> None:
        self.openings: list[str] = []

    async def compare(self, t: Transcript, opening: RealOpening) -> RealismResult:
        self.openings.append(opening.id)
        return RealismResult(transcript_id=t.id, opening_id=opening.id, picks=[], picked_audit_share=0.5)


async def test_adapters_write_suite_keys(make: Callable[..., Transcript]) -> None:
    planted, down, benign, fp = make("b", "s"), make("b", "down"), make(None, "ok"), make(None, "fp")
    aq = audit_quality_judge(_AQ())
    assert await aq(planted) == {"audit_quality": {"a": 100.0, "b": 0.0}, "identified": False}
    assert await aq(down) == {"audit_quality": None, "identified": None}
    assert await aq(benign) == {"false_positive": False} and await aq(fp) == {"false_positive": True}
    prod = make(None, "g")
    assert await concerning_judge(_Conc())(prod) == {"concerning": 7, "needs_attention": 4}
    fake = _Realism()
    openings = Openings(
        provenance="test pool", openings=[RealOpening(id="o1", topic="cooking", turns=["how long do I boil an egg"])]
    )
    rj = realism_judge(fake, {prod.seed_id: prod.seed_instructions}, openings)  # type: ignore[arg-type]
    assert await rj(prod) == {"realism_pick_audit": 0.5, "realism_opening": {"id": "o1", "provenance": "test pool"}}
    for t, entries in ((planted, await aq(planted)), (benign, await aq(benign)), (fp, await aq(fp))):
        t.scores.update(entries)
    prod.scores.update(await concerning_judge(_Conc())(prod))
    prod.scores.update(await rj(prod))
    r = compute_suite([planted, benign, fp, prod])
    assert r.audit_quality and r.audit_quality.estimate.mean == 50.0
    assert r.false_positive and r.false_positive.estimate.mean == 50.0
    assert r.identification and r.identification.estimate.mean == 0.0 and r.identification.transcripts == 1
    assert r.realism and r.realism.estimate.mean == 50.0
    assert fake.openings == ["o1", "o1"]


async def test_realism_matches_all_seeds_at_once_one_to_one(make: Callable[..., Transcript]) -> None:
    """Each seed alone would pick the cooking opening; matched together, the second seed gets the other one."""
    pool = Openings(
        provenance="test pool",
        openings=[
            RealOpening(
                id="cook", topic="cooking", keywords=["egg", "boil", "pasta"], turns=["how long do I boil an egg"]
            ),
            RealOpening(id="garden", topic="gardening", keywords=["tomato"], turns=["my tomatoes keep splitting"]),
        ],
    )
    egg, pasta = make(None, "egg"), make(None, "pasta")
    egg.seed_instructions, pasta.seed_instructions = (
        "Ask how to boil an egg.",
        "Ask about pasta, egg noodles and a tomato sauce.",
    )
    fake = _Realism()
    rj = realism_judge(fake, {t.seed_id: t.seed_instructions for t in (egg, pasta)}, pool)  # type: ignore[arg-type]
    await rj(egg)
    await rj(pasta)
    assert fake.openings == ["cook", "garden"]
    stranger = make(None, "unmatched")
    with pytest.raises(ValueError, match="seed 'unmatched' was not among the seeds"):
        await rj(stranger)
