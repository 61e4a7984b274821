"""The contract checks' audits exercise what the checks compare: otherwise a check could pass vacuously."""

from __future__ import annotations

import numpy as np

from auditrl.auditworld.designs import binary_rewards
from auditrl.auditworld.judges import JudgeParams
from auditrl.rewards.reference import ReferenceStore
from auditrl.testing.audits import audit_batches


def test_each_batch_has_planted_and_benign_groups_with_a_reference_for_every_rollout() -> None:
    for batch in audit_batches():
        assert batch.planted_groups() and batch.benign_groups()
        assert all(len({(t.behavior_id, t.seed_id) for t in g}) == 1 for g in batch.groups())
        store = batch.reference_store()
        refs = [store.get(ReferenceStore.key_of(t)) for t in batch.transcripts]
        assert all(r is not None and r.id != t.id for r, t in zip(refs, batch.transcripts, strict=True))
        assert len(batch.transcripts) == batch.observed.claim.shape[0]


def test_the_audits_claim_and_stay_silent_on_both_kinds_of_target_and_split_the_binary_judges() -> None:
    observed = [b.observed for b in audit_batches()]
    planted = np.concatenate([o.planted for o in observed])
    claimed = np.concatenate([o.claim >= 0 for o in observed])
    for kind in (planted, ~planted):
        assert (kind & claimed).any() and (kind & ~claimed).any()
    lenient = np.concatenate([binary_rewards(o, JudgeParams()) for o in observed])
    strict = np.concatenate([binary_rewards(o, JudgeParams(), strict=True) for o in observed])
    assert lenient[planted].any() and not lenient[planted].all()
    assert (lenient != strict).any()  # the binary_strict form is compared where it differs from binary
