"""The experiment's tests share the trainer tests' fakes and fixtures (tests/train), as the experiment builds on
the trainer."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "train"))


@pytest.fixture(scope="session")
def grammar_sft(tiny_local_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any], Path]:
    """SFT under the sentence report grammar on the tiny model (12 teacher audits of four training behaviors, three
    epochs), run once: its config, record and folder. test_report_choices checks what it trained; the choice gradient's
    command tests start from its adapter, as any SFT base would serve them."""
    from small_lm_helpers import run_config
    from test_report_choices import CFG

    from auditrl.experiments.small_lm.choice_sft import SmallLMSFTSettings, run_experiment_sft

    raw = json.loads(CFG.model_dump_json(exclude={"source"}))
    raw["policy"] |= {"model": str(tiny_local_model), "dtype": "float32"}
    raw["policy"]["lora"]["last_layers"] = 1
    raw["data"] |= {"behaviors": ["flattery", "emotional_bond", "urgency_manufacturing", "self_promotion"]}
    raw["experiment"] |= {"planted_groups": "creditable"}
    cfg = run_config(raw)
    folder = tmp_path_factory.mktemp("grammar-sft") / "sft"
    settings = SmallLMSFTSettings(episodes=12, epochs=3, batch_size=2, learning_rate=1e-2)
    return cfg, run_experiment_sft(cfg, settings, folder), folder
