"""A GRPO run of the tiny random-init policy on AuditWorld targets, to be killed and resumed by the tests.

    python crash_lm_child.py RUN_DIR TOKENIZER_DIR

Each checkpoint save announces itself by creating `RUN_DIR/saving-<step>` after the adapter is written
and before the optimizer, trainer state and auditrl state are, then pauses, so a test can kill the
process in the middle of a save.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from transformers import Trainer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train"))
from train_fakes import tiny_policy  # noqa: E402

from auditrl.train.config import load_config  # noqa: E402
from auditrl.train.grpo import train_run  # noqa: E402

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "cpu_offline.yaml"
STEPS = 3
SAVE_PAUSE_S = 1.0


def crash_config() -> Any:
    """cpu_offline with one-turn episodes, a checkpoint every step and the reference snapshot refreshed every 2
    steps."""
    cfg = load_config(CONFIG)
    return cfg.model_copy(
        update={
            "episodes": cfg.episodes.model_copy(update={"max_turns": 1, "max_new_tokens": 12}),
            "reward": cfg.reward.model_copy(update={"reference_refresh_steps": 2}),
            "trainer": cfg.trainer.model_copy(
                update={"max_steps": STEPS, "save_steps": 1, "report_to": ["tensorboard"]}
            ),
        }
    )


def main(run_dir: Path, tokenizer_dir: Path) -> None:
    save = Trainer._save_optimizer_and_scheduler

    def announced_save(self: Trainer, output_dir: str) -> None:
        (run_dir / f"saving-{self.state.global_step}").touch()
        time.sleep(SAVE_PAUSE_S)
        save(self, output_dir)

    Trainer._save_optimizer_and_scheduler = announced_save  # type: ignore[method-assign]
    train_run(crash_config(), run_dir, policy=tiny_policy(tokenizer_dir), progress=False)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
