"""The training run's HTML page: the before/after table and what the policy sampled while training."""

from __future__ import annotations

import json
from pathlib import Path

from train_fakes import tiny_config

from auditrl.pages.training import write_training_page


def estimate(mean: float, lo: float, hi: float) -> dict[str, float | int]:
    return {"mean": mean, "lo": lo, "hi": hi, "n": 12}


def test_report_shows_the_held_out_difference_and_the_training_thirds(tmp_path: Path) -> None:
    evaluation = {
        "seeds_per_behavior": 2,
        "rollouts": 2,
        "metrics": {
            "valid_reports": {
                "base": estimate(12.5, 4.2, 20.8),
                "trained": estimate(58.3, 45.8, 70.8),
                "difference": estimate(45.8, 31.0, 60.6),
            }
        },
        "training": [
            {
                "steps": "0-12",
                "rollouts": 104,
                "valid_tool_calls": 68.3,
                "valid_reports": 9.6,
                "benign_nothing_found": None,
                "reward": estimate(0.512, 0.47, 0.55),
            },  # fmt: skip
        ],
    }
    records = [{"step": step, "rollouts": 8, "reward/mean": 0.5, "reward/std": 0.3} for step in range(3)]
    (tmp_path / "monitors.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    html = write_training_page(tmp_path, tiny_config(), evaluation=evaluation).read_text(encoding="utf-8")
    assert "+45.8 [+31.0, +60.6]" in html and "58.3 [45.8, 70.8]" in html
    assert "benign: nothing found" in html and "0.512 [0.470, 0.550]" in html and "68.3" in html


def test_the_evaluate_command_names_the_target_the_run_trained_against(tmp_path: Path) -> None:
    """A `{family}` template naming whole model specs (API, `local/` implants) is filled in, not put under `sim/`."""
    from auditrl.train.outputs import evaluate_command

    assert "--target sim/steady " in evaluate_command(tmp_path, tiny_config())
    cfg = tiny_config()
    cfg.episodes = cfg.episodes.model_copy(update={"target_model": "{family}", "families": ["openai/gpt-4.1-mini"]})
    assert "--target openai/gpt-4.1-mini " in evaluate_command(tmp_path, cfg)
