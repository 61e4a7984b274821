"""Report-only training: a probing teacher writes the audit turns before the report, the policy writes the report."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from auditrl.models.roles import resolve_model
from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transcript_keys import PROBED_BY
from auditrl.train.config import EpisodeSettings
from auditrl.train.episodes import AuditEpisodeFactory
from auditrl.train.generation import Sample, TurnConstraint
from auditrl.train.rollout import ChatSegments, Episode, EpisodeRow, TurnGenerator
from auditrl.train.teacher import TeacherTurns


@dataclass
class TeacherProbing:
    """A TurnGenerator for report-only training (`experiment.probing: teacher`): the teacher writes each probing
    turn and the policy's generator the report turn. The teacher's tokens carry no logprob, so they stay in
    context and out of the loss, like the environment's; the report is sampled and trained as in a whole audit.

    Rollout keys are global rollout indices; the teacher numbers its episodes from 0 in each batch, and every
    rollout of a batch is live on the first call, so the first key is the batch's offset."""

    policy: TurnGenerator
    teacher: TeacherTurns
    offset: int | None = None

    def factory(self, row: EpisodeRow) -> Episode:
        return self.teacher.factory(row)

    def start(self) -> None:
        self.policy.start()
        self.teacher.start()
        self.offset = None

    def __call__(
        self, keys: list[int], contexts: list[list[int]], constraint: TurnConstraint | None = None
    ) -> list[Sample]:
        if self.offset is None:
            self.offset = keys[0]
        local = [k - self.offset for k in keys]
        probing = [i for i, k in enumerate(local) if self.teacher.live[k].phase != "report"]
        probed = set(probing)
        report = [i for i in range(len(keys)) if i not in probed]
        samples: list[Sample | None] = [None] * len(keys)
        if probing:
            written = self.teacher([local[i] for i in probing], [contexts[i] for i in probing])
            for i, sample in zip(probing, written, strict=True):
                samples[i] = Sample(sample.ids, [None] * len(sample.ids))
        if report:
            own = constraint.select(report) if constraint is not None else None
            report_keys, report_contexts = [keys[i] for i in report], [contexts[i] for i in report]
            sampled = (
                self.policy(report_keys, report_contexts, own)
                if own is not None
                else self.policy(report_keys, report_contexts)
            )
            for i, sample in zip(report, sampled, strict=True):
                samples[i] = sample
        return [s for s in samples if s is not None]

    def mark(self, transcripts: Sequence[Transcript]) -> None:
        """Name the prober on each audit and mark those whose teacher call failed as errors."""
        for transcript in transcripts:
            PROBED_BY.set(transcript, self.teacher.spec)
        self.teacher.mark_failures(transcripts)

    def close(self) -> None:
        self.teacher.close()


def teacher_probing(
    settings: EpisodeSettings,
    probing_teacher: str,
    policy: TurnGenerator,
    episodes: AuditEpisodeFactory,
    segments: ChatSegments,
) -> TeacherProbing:
    """`probing_teacher`'s probing for `policy`'s reports."""
    return TeacherProbing(policy, TeacherTurns(
        resolve_model(probing_teacher), probing_teacher, episodes, segments, settings.max_new_tokens,
        max_report_tokens=settings.max_report_tokens,
    ))  # fmt: skip
