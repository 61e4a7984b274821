"""Fixtures for the judge tests: scripted judge clients."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from auditrl.judges.client import JudgeClient
from auditrl.judges.scripted import JudgeCall, Reply, scripted_judge_model


@pytest.fixture
def scripted_client() -> Callable[[Callable[[JudgeCall], Reply]], JudgeClient]:
    def make(respond: Callable[[JudgeCall], Reply], **kwargs: Any) -> JudgeClient:
        return JudgeClient(scripted_judge_model(respond), **kwargs)

    return make
