"""Two CPU processes (gloo) run a real GRPO step with the tiny policy; a group split across ranks stays intact.

Layout: groups of 2, 3 groups per step, 2 ranks, 1 rollout per pass -> 3 rollouts per rank, so the
second group has one rollout on each rank. The reward must gather it whole before scoring.
"""

from __future__ import annotations

import json
from pathlib import Path

from train_fakes import FakeEpisode, LengthDesign, rows_for, spawn_gloo, tiny_config, tiny_policy

WORLD = 2


def _worker(rank: int, tokenizer_dir: str, out: str) -> None:
    from auditrl.train.grpo import build_trainer

    cfg = tiny_config()
    cfg = cfg.model_copy(update={"data": cfg.data.model_copy(update={"groups_per_step": 3})})
    design = LengthDesign()
    trainer, _, reward = build_trainer(
        cfg,
        Path(out) / "run",
        factory=lambda row: FakeEpisode(row, turns=2),
        design=design,
        rows=rows_for(steps=1, groups=3),
        policy=tiny_policy(Path(tokenizer_dir)),
    )
    seen: list[list[int]] = []
    original = trainer.rollout_func

    def spy(prompts: list[str], t: object) -> dict:
        result = original(prompts, t)
        seen.append(result["group_index"])
        return result

    trainer.rollout_func = spy
    trainer.train()
    lora = {n: p.detach().sum().item() for n, p in trainer.model.named_parameters() if "lora_B" in n}
    Path(out, f"rank{rank}.json").write_text(
        json.dumps({"world": trainer.accelerator.num_processes, "groups": seen, "scored": design.calls, "lora": lora})
    )
    reward.runner.close()


def test_two_processes_keep_groups_intact(tokenizer_dir: Path, tmp_path: Path) -> None:
    spawn_gloo(_worker, WORLD, str(tokenizer_dir), str(tmp_path))
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD)]
    assert all(r["world"] == WORLD for r in ranks)
    assert ranks[0]["groups"] == [[0, 0, 1]] and ranks[1]["groups"] == [[1, 2, 2]]
    assert ranks[0]["scored"] == [["s0_0", "s0_0"], ["s0_1", "s0_1"], ["s0_2", "s0_2"]]
    assert ranks[1]["scored"] == []
    assert ranks[0]["lora"] == ranks[1]["lora"]
    assert any(v != 0.0 for v in ranks[0]["lora"].values())
    stored = (tmp_path / "run" / "transcripts.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["metadata"]["rollout"] for line in stored) == list(range(6))
