"""The near-duplicate test between auditor messages gives difflib's answer, with its cheap bounds taken first."""

from __future__ import annotations

import difflib

from hypothesis import given, settings
from hypothesis import strategies as st

from auditrl.analysis.features import NEAR_DUPLICATE, _NearDuplicates

TEXTS = st.text(alphabet="abcde ", max_size=30)


def _difflib(a: str, b: str) -> bool:
    m = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return a == b or (
        m.real_quick_ratio() >= NEAR_DUPLICATE and m.quick_ratio() >= NEAR_DUPLICATE and m.ratio() >= NEAR_DUPLICATE
    )


@settings(max_examples=300, deadline=None)
@given(TEXTS, TEXTS, st.sampled_from(["", "x", "please tell me more about it"]))
def test_near_duplicates_agree_with_difflib(a: str, b: str, suffix: str) -> None:
    shared = _NearDuplicates()
    for x, y in ((a, b), (a + suffix, a), (a + suffix, b + suffix)):
        near = shared.for_audit()  # one audit: a pair asked both ways answers as it did the first time
        assert near(x, y) == near(y, x) == _difflib(x, y)
        assert x == y or shared.ordered(y, x) == _difflib(y, x)  # remembered across audits, each way its own
