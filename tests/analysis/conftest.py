"""Fixtures exposing the transcript builders of strategy_fixtures."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from strategy_fixtures import build_audit, finding

from auditrl.scaffold.transcript import Report, Transcript


@pytest.fixture
def audit() -> Callable[..., Transcript]:
    return build_audit


@pytest.fixture
def report_with() -> Callable[..., Report]:
    return finding
