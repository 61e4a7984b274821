"""The experiment's tests share the trainer tests' fakes and fixtures (tests/train), as the experiment builds on
the trainer."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "train"))
