"""Fixtures shared by the AuditWorld job tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def no_report_images(monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's figures are still drawn but not encoded as PNG, about half of a tiny run: the tests using this
    read results, tables and checkpoints, and tests/pages/test_html.py checks the encoded images."""
    from auditrl.pages import html

    monkeypatch.setattr(html, "figure_png_base64", lambda fig, dpi=110: "")
