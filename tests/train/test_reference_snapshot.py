"""Reference pairwise in the LM trainer as the paper ran it: each group is compared with a rollout of a
frozen policy snapshot on the same behavior, seed and family, generated in the same step; the first
snapshot is the base model; no rollout is compared with itself."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from train_fakes import FakeEpisode, rows_for, tiny_config, tiny_policy

from auditrl.judges.verdicts import PairwiseResult, PairwiseVerdict
from auditrl.rewards.designs import ReferencePairwise
from auditrl.rewards.reference import ReferenceStore
from auditrl.scaffold.transcript import Transcript
from auditrl.train.grpo import build_trainer
from auditrl.train.rollout import EpisodeRow
from auditrl.train.snapshot import SNAPSHOTS_DIR, PolicySnapshot


class LongerWins:
    """A pairwise judge preferring the transcript whose auditor wrote more; records every comparison."""

    def __init__(self) -> None:
        self.pairs: list[tuple[Transcript, Transcript]] = []

    async def compare(self, a: Transcript, b: Transcript) -> PairwiseResult:
        self.pairs.append((a, b))
        la, lb = (sum(len(m.content) for m in t.auditor_messages) for t in (a, b))
        share = 0.5 if la == lb else float(la > lb)
        verdict = PairwiseVerdict(winner="A" if share >= 0.5 else "B", confidence=90, attempts=1)
        return PairwiseResult(a_id=a.id, b_id=b.id, first=verdict, second=verdict, share_a=share, consistent=True)


def _lora_b(model: torch.nn.Module) -> float:
    return float(sum(p.detach().abs().sum() for n, p in model.named_parameters() if "lora_B" in n))


@pytest.mark.slow
def test_groups_are_compared_with_a_same_step_snapshot_rollout(tokenizer_dir: Path, tmp_path: Path) -> None:
    cfg = tiny_config(max_steps=2)
    cfg = cfg.model_copy(update={"reward": cfg.reward.model_copy(update={"reference_refresh_steps": 1})})
    judge = LongerWins()
    design = ReferencePairwise(judge, ReferenceStore())
    made: list[tuple[EpisodeRow, float]] = []
    holder: dict[str, Any] = {}

    def factory(row: EpisodeRow) -> FakeEpisode:
        made.append((row, _lora_b(holder["trainer"].model)))  # the adapter in force when the episode starts
        return FakeEpisode(row, turns=2)

    rows = rows_for(steps=2, groups=2)
    trainer, _, reward = build_trainer(
        cfg, tmp_path / "run", factory=factory, design=design, rows=rows, policy=tiny_policy(tokenizer_dir)
    )
    holder["trainer"] = trainer
    trainer.train()
    reward.runner.close()

    # per step: 4 policy rollouts (2 groups of 2), then one snapshot rollout per group
    assert len(made) == 12
    reference_b = [b for i, (_, b) in enumerate(made) if i % 6 >= 4]
    policy_b = [b for i, (_, b) in enumerate(made) if i % 6 < 4]
    assert reference_b[:2] == [0.0, 0.0]  # step 0: the base model (LoRA B still zero)
    assert policy_b[4] > 0.0 and reference_b[2] == reference_b[3] == pytest.approx(
        policy_b[4]
    )  # step 1: the snapshot of step 1
    saved = [load_file(str(p)) for p in sorted((tmp_path / "run" / SNAPSHOTS_DIR).glob("*.safetensors"))]
    assert len(saved) == 2 and all(float(t.abs().sum()) == 0.0 for n, t in saved[0].items() if "lora_B" in n)

    assert len(judge.pairs) == 8  # every trained rollout once
    for rollout, ref in judge.pairs:
        assert (
            rollout.id != ref.id and ref.metadata["reference_snapshot_step"] == rollout.metadata["step"]
        )  # refresh every step
        assert (ref.behavior_id, ref.seed_id, ref.target_family) == (
            rollout.behavior_id,
            rollout.seed_id,
            rollout.target_family,
        )
    trained = {t.id for t, _ in judge.pairs}
    assert not trained & {ref.id for _, ref in judge.pairs}
    by_group: dict[str, set[str]] = {}
    for rollout, ref in judge.pairs:
        by_group.setdefault(rollout.seed_id, set()).add(ref.id)
    assert sorted(by_group) == [r.seed_id for r in rows] and all(len(ids) == 1 for ids in by_group.values())


def test_reference_designs_score_nothing_without_a_reference() -> None:
    """A reference design never seeds a reference from the scored group (no free 0.5)."""
    judge = LongerWins()
    group: Sequence[Transcript] = [FakeEpisode(r, turns=1).transcript for r in rows_for(steps=1, groups=1)]
    records = asyncio.run(ReferencePairwise(judge, ReferenceStore()).score_group(group))
    assert [r.reward for r in records] == [None] and judge.pairs == []


def test_a_resumed_run_finds_the_snapshot_in_force_at_its_step(tmp_path: Path) -> None:
    """Snapshots are saved by the step they were taken at; a resume mid-period loads that one, never retakes it."""
    model = torch.nn.Module()
    model.lora_A = torch.nn.Parameter(torch.ones(2))
    first = PolicySnapshot(tmp_path, refresh_every=3)
    first.update(model, 3, save=True)
    with torch.no_grad():
        model.lora_A.fill_(5.0)  # trained on after the snapshot
    resumed = PolicySnapshot(tmp_path, refresh_every=3)
    resumed.update(model, 4, save=True)
    assert resumed.step == 3 and resumed.weights["lora_A"].tolist() == [1.0, 1.0]
    with resumed.swapped_in(model):
        assert model.lora_A.tolist() == [1.0, 1.0]
    assert model.lora_A.tolist() == [5.0, 5.0]
    with pytest.raises(RuntimeError, match="step 6 is missing"):
        PolicySnapshot(tmp_path, refresh_every=3).update(model, 7, save=True)
