"""TRL's reward function: whole groups of every rank scored by one reward design, logged and monitored."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accelerate import PartialState
from accelerate.utils import broadcast_object_list, gather_object
from transformers import TrainerState

from auditrl.judges.client import JudgeClient
from auditrl.judges.registry import resolve_judges
from auditrl.models.roles import resolve_model
from auditrl.rewards.records import RewardDesign, RewardRecord
from auditrl.rewards.reference import ReferenceStore
from auditrl.rewards.registry import build_design
from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transcript_keys import (
    GROUP,
    ORDER_DISAGREEMENT,
    REFERENCE_SNAPSHOT_STEP,
    REWARD,
    REWARD_DESIGN,
    REWARD_DETAILS,
    ROLLOUT,
    STEP,
)
from auditrl.train.checkpoint import TranscriptLog
from auditrl.train.config import GRPOLMConfig
from auditrl.train.extensions import NO_EXTENSION, TrainingExtension
from auditrl.train.monitors import MonitorLog, load_markers, step_metrics
from auditrl.train.rollout import check_groups
from auditrl.train.runtime import AsyncRunner

REWARD_NAME = "audit_reward"
REFERENCES_FILE = "references.json"


class GroupReward:
    """TRL reward function scoring whole groups with one reward design (see module docstring)."""

    __name__ = REWARD_NAME

    def __init__(
        self,
        design: RewardDesign,
        group_size: int,
        runner: AsyncRunner,
        log: TranscriptLog | None,
        monitors: MonitorLog | None,
        markers_path: Path | None = None,
        no_contact_reward: float | None = None,
        benign_scale: float = 1.0,
        extension: TrainingExtension = NO_EXTENSION,
    ) -> None:
        self.design = design
        self.no_contact_reward = no_contact_reward
        self.benign_scale = benign_scale
        self.extension = extension
        """Transforms each step's rewards (auditrl.train.extensions); a plain run's changes nothing."""
        self.group_size = group_size
        self.runner = runner
        self.log = log
        self.monitors = monitors
        self.markers = load_markers(markers_path)
        self.seconds = 0.0
        self.last_rewards: list[float | None] = []

    def __call__(
        self,
        prompts: list[str],
        completions: list[Any],
        transcript: list[Transcript],
        group_index: list[int],
        rollout_index: list[int],
        trainer_state: TrainerState,
        reference: list[Transcript | None] | None = None,
        **_: Any,
    ) -> list[float | None]:
        started = time.perf_counter()
        references = reference if reference is not None else [None] * len(prompts)
        everything = gather_object(list(zip(prompts, transcript, group_index, rollout_index, references, strict=True)))
        rows = [e[0] for e in everything]
        groups = [e[2] for e in everything]
        check_groups(rows, groups, self.group_size)
        step = trainer_state.global_step
        payload: list[Any] = [None]
        if PartialState().is_main_process:
            transcripts = [e[1] for e in everything]
            self._use_references([e[4] for e in everything if e[4] is not None])
            before = [len(c) for c in self._comparisons()]
            rewards = self._score(transcripts)
            new = [r for c, n in zip(self._comparisons(), before, strict=True) for r in c[n:]]
            rewards, shared = self.extension.adjust_rewards(step, transcripts, rewards, self.rescore)
            for t, g, r, reward in zip(transcripts, groups, (e[3] for e in everything), rewards, strict=True):
                STEP.set(t, step)
                GROUP.set(t, g)
                ROLLOUT.set(t, r)
                REWARD.set(t, reward)
                t.scores.setdefault(REWARD_DESIGN, self.design.name)
                if self.log is not None:
                    self.log.append(t)
            if self.monitors is not None:
                values = step_metrics(transcripts, rewards, self.markers, position_disagreement(new))
                values.update(self.extension.metrics())
                self.monitors.write(step, values, {"rollouts": len(rewards)})
            payload = [(rewards, shared)]
        broadcast_object_list(payload, from_process=0)
        all_rewards, shared = payload[0]
        self.extension.receive(shared)
        self.last_rewards = all_rewards
        start = PartialState().process_index * len(prompts)
        self.seconds += time.perf_counter() - started
        return all_rewards[start : start + len(prompts)]

    def _use_references(self, references: list[Transcript]) -> None:
        """This step's snapshot rollouts become the references the design compares with (and are saved).

        A failed reference rollout is dropped, so its group goes unscored rather than judged against it."""
        store = reference_store(self.design)
        if store is None or not references:
            return
        store.replace(
            int(references[0].metadata[REFERENCE_SNAPSHOT_STEP]), [t for t in references if t.status != "error"]
        )

    def _comparisons(self) -> list[list[Any]]:
        """Per part of the design, every pairwise comparison it has made so far (both orders each)."""
        return [getattr(part, "results", []) for part in design_parts(self.design)]

    def _records(self, transcripts: list[Transcript]) -> list[RewardRecord]:
        """The design's record of every audit, scored group by group."""
        groups = [transcripts[i : i + self.group_size] for i in range(0, len(transcripts), self.group_size)]

        async def score_all() -> list[list[RewardRecord]]:
            return list(await asyncio.gather(*(self.design.score_group(g) for g in groups)))

        scored = self.runner.run(score_all())
        for group, records in zip(groups, scored, strict=True):
            if len(records) != len(group):
                raise RuntimeError(f"reward design {self.design.name} returned {len(records)} rewards for {len(group)}")
        return [r for records in scored for r in records]

    def _reward(self, t: Transcript, record: RewardRecord) -> tuple[float | None, dict[str, Any]]:
        return scaled_reward(t, record, self.no_contact_reward, self.benign_scale)

    def _score(self, transcripts: list[Transcript]) -> list[float | None]:
        rewards: list[float | None] = []
        for t, record in zip(transcripts, self._records(transcripts), strict=True):
            reward, details = self._reward(t, record)
            rewards.append(reward)
            REWARD_DETAILS.set(t, details)
            consistent = record.details.get("consistent")
            if consistent is not None:
                ORDER_DISAGREEMENT.set(t, 0.0 if consistent else 1.0)
        return rewards

    def rescore(self, transcripts: list[Transcript]) -> list[tuple[float | None, dict[str, Any]]]:
        """Each audit's reward and details under this reward, scored group by group (an extension's `Scorer`)."""
        return [self._reward(t, r) for t, r in zip(transcripts, self._records(transcripts), strict=True)]


def scaled_reward(
    t: Transcript, record: RewardRecord, no_contact_reward: float | None, benign_scale: float
) -> tuple[float | None, dict[str, Any]]:
    """The audit's reward from its design record (None for a failed audit or score; reward.no_contact_reward where the
    target never replied; times reward.benign_scale on a benign target) and the details to store."""
    v = record.reward
    details = dict(record.details)
    if v is None or math.isnan(v) or t.status == "error":
        return None, details
    if no_contact_reward is not None and not t.target_said():
        v, details["no_contact"] = no_contact_reward, True
    if t.benign and benign_scale != 1.0:
        v, details["benign_scale"] = v * benign_scale, benign_scale
    return float(v), details


def position_disagreement(comparisons: Sequence[Any]) -> float | None:
    """Share of comparisons answered in both orders whose orders disagreed (None when there are none)."""
    answered = [c.consistent for c in comparisons if getattr(c, "consistent", None) is not None]
    return sum(not c for c in answered) / len(answered) if answered else None


def design_parts(design: Any) -> list[Any]:
    """A design and the designs it dispatches to (calibration mixing holds a planted and a benign design)."""
    parts = [design]
    for name in ("planted", "benign"):
        inner = getattr(design, name, None)
        if inner is not None:
            parts += design_parts(inner)
    return parts


def reference_store(design: Any) -> ReferenceStore | None:
    """The reference store a (reference-pairwise) design caches its references in, if any."""
    for part in design_parts(design):
        store = getattr(part, "store", None)
        if isinstance(store, ReferenceStore):
            return store
    return None


def make_design(cfg: GRPOLMConfig, run_dir: Path) -> RewardDesign:
    """The configured reward design. A reference design reads its references, never seeds them from the
    scored group: each step the trainer supplies snapshot rollouts (auditrl.train.snapshot), saved in the run."""
    limits = cfg.reward.judge_calls
    judges = resolve_judges(
        cfg.reward.judge,
        extra_dimensions=cfg.reward.extra_dimensions,
        client=lambda spec: JudgeClient(resolve_model(spec, limits=limits, **cfg.reward.judge_args), limits=limits),
    )
    store = ReferenceStore(run_dir / REFERENCES_FILE)
    return build_design(cfg.reward.design, judges, benign_fraction=cfg.data.benign_fraction, references=store)
