"""The collective timeout (trainer.ddp_timeout) is the one the process group starts with.

The Trainer applies `ddp_timeout` only when it creates the process layout itself; auditrl creates it first
(rank 0 decides what to rewind before the trainer exists), so the timeout must go in at that moment or the
group keeps torch's default (10 minutes under NCCL) while rank 0 makes every judge call of a step.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch.distributed as dist
from train_fakes import FakeEpisode, LengthDesign, rows_for, spawn_gloo, tiny_config, tiny_policy

WORLD = 2
TIMEOUT = 4321


def _worker(rank: int, tokenizer_dir: str, out: str) -> None:
    started: list[float | None] = []
    init = dist.init_process_group

    def recording(*args: object, **kwargs: object) -> None:
        timeout = kwargs.get("timeout")
        started.append(timeout.total_seconds() if timeout is not None else None)  # type: ignore[attr-defined]
        init(*args, **kwargs)  # type: ignore[arg-type]

    dist.init_process_group = recording  # type: ignore[assignment]
    from auditrl.train.grpo import build_trainer

    trainer, _, reward = build_trainer(
        tiny_config(ddp_timeout=TIMEOUT), Path(out) / "run", factory=lambda row: FakeEpisode(row),
        design=LengthDesign(), rows=rows_for(steps=1, groups=2), policy=tiny_policy(Path(tokenizer_dir)),
    )  # fmt: skip
    Path(out, f"rank{rank}.json").write_text(json.dumps({"started": started, "args": trainer.args.ddp_timeout}))
    reward.runner.close()


@pytest.mark.slow
def test_process_group_starts_with_the_configured_timeout(tokenizer_dir: Path, tmp_path: Path) -> None:
    spawn_gloo(_worker, WORLD, str(tokenizer_dir), str(tmp_path))
    for rank in range(WORLD):
        seen = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert seen == {"started": [TIMEOUT], "args": TIMEOUT}
