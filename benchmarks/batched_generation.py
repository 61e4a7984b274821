"""Per-turn batched generation vs per-episode sequential generation on the same audit work, and the
time split of one GRPO step (generation, judging, update), with SmolLM2 on CPU.

Same work: the same episodes (real episode engine, simulated `sim/<family>` targets), the same number
of turns, and every turn forced to the same number of sampled tokens, so only the batching differs:
- sequential: each episode generates its own turns, one `generate` call per episode per turn;
- batched: one left-padded `generate` per turn for all live episodes, recomputing every context;
- batched + KV cache: as batched, plus each rollout's key/value cache kept across turns and a group's
  shared opening prompt prefilled once (what the trainer uses with HF generation).

    OMP_NUM_THREADS=1 python benchmarks/batched_generation.py [--groups 2 --group-size 4 --turns 2 --tokens 32] \
        [--config configs/cpu_offline.yaml]
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Annotated

import torch
import typer
from rich.console import Console
from rich.table import Table
from transformers import GenerationConfig, PreTrainedModel

from auditrl.behaviors.library import load_behaviors, load_seeds
from auditrl.train.config import EpisodeSettings, GRPOLMConfig, load_config
from auditrl.train.episodes import AuditEpisodeFactory, training_rows
from auditrl.train.generation import Sample, TurnCache, generate_turn
from auditrl.train.grpo import build_trainer
from auditrl.train.policy import load_policy
from auditrl.train.rollout import ChatSegments, EpisodeRow, run_rollouts

CONFIG = Path(__file__).resolve().parent.parent / "configs" / "cpu_offline.yaml"
console = Console(width=120)


class Sequential:
    """One generate call per episode per turn."""

    def __init__(self, model: PreTrainedModel, config: GenerationConfig, pad: int, eos: set[int]) -> None:
        self.model, self.config, self.pad, self.eos = model, config, pad, eos

    def start(self) -> None:
        return None

    def __call__(self, keys: list[int], contexts: list[list[int]]) -> list[Sample]:
        return [generate_turn(self.model, [c], self.config, self.pad, self.eos)[0] for c in contexts]


class Batched(Sequential):
    """One generate call per turn for all live episodes."""

    def __call__(self, keys: list[int], contexts: list[list[int]]) -> list[Sample]:
        return generate_turn(self.model, contexts, self.config, self.pad, self.eos)


class BatchedCached(Sequential):
    """Batched, with key/value caches kept across turns."""

    def start(self) -> None:
        self.cache = TurnCache()

    def __call__(self, keys: list[int], contexts: list[list[int]]) -> list[Sample]:
        return self.cache.generate(self.model, keys, contexts, self.config, self.pad, self.eos)


def _config(config: Path, groups: int, group_size: int, turns: int, tokens: int) -> GRPOLMConfig:
    cfg = load_config(config)
    return cfg.model_copy(
        update={
            "episodes": cfg.episodes.model_copy(update={"max_turns": turns, "max_new_tokens": tokens}),
            "data": cfg.data.model_copy(update={"group_size": group_size, "groups_per_step": groups}),
            "trainer": cfg.trainer.model_copy(update={"max_steps": 1, "save_steps": 1000, "report_to": []}),
        }
    )


def generation_table(cfg: GRPOLMConfig, model: PreTrainedModel, segments: ChatSegments) -> Table:
    behaviors = load_behaviors()
    seeds = load_seeds()
    rows: list[EpisodeRow] = [r for r in training_rows(cfg, behaviors, seeds) for _ in range(cfg.data.group_size)]
    settings: EpisodeSettings = cfg.episodes
    tok = segments.tokenizer
    gen = GenerationConfig(
        do_sample=True,
        temperature=settings.temperature,
        top_k=0,
        top_p=1.0,
        max_new_tokens=settings.max_new_tokens,
        min_new_tokens=settings.max_new_tokens,
        pad_token_id=tok.pad_token_id,
        eos_token_id=[tok.eos_token_id],
        output_logits=True,
        return_dict_in_generate=True,
    )
    eos = {tok.eos_token_id}
    table = Table(
        title=f"{len(rows)} episodes x {settings.max_turns} turns (+ report), {settings.max_new_tokens} tokens/turn"
    )
    for column in ("mode", "seconds", "sampled tokens", "tokens/s", "speed-up vs sequential"):
        table.add_column(column, justify="left" if column == "mode" else "right")
    base = None
    for name, generator in (
        ("per-episode sequential", Sequential(model, gen, tok.pad_token_id, eos)),
        ("per-turn batched", Batched(model, gen, tok.pad_token_id, eos)),
        ("per-turn batched + KV cache", BatchedCached(model, gen, tok.pad_token_id, eos)),
    ):
        factory = AuditEpisodeFactory(settings, behaviors, seeds, "policy/bench")
        torch.manual_seed(0)
        start = time.perf_counter()
        batch = asyncio.run(
            run_rollouts(
                rows,
                factory,
                generator,
                segments,
                group_size=cfg.data.group_size,
                first_index=0,
                max_completion_tokens=settings.max_completion_tokens,
                auditor_name="policy/bench",
            )
        )
        seconds = time.perf_counter() - start
        sampled = sum(sum(m) for m in batch.env_mask)
        base = base or seconds
        table.add_row(name, f"{seconds:.1f}", str(sampled), f"{sampled / seconds:.1f}", f"{base / seconds:.2f}x")
        console.print(f"{name}: {seconds:.1f} s")
    return table


def step_table(cfg: GRPOLMConfig, out: Path) -> Table:
    trainer, rollout, reward = build_trainer(cfg, out)
    start = time.perf_counter()
    trainer.train()
    total = time.perf_counter() - start
    update = total - rollout.seconds - reward.seconds
    table = Table(title=f"one GRPO step: {cfg.data.groups_per_step} groups x {cfg.data.group_size} rollouts, LoRA")
    table.add_column("phase")
    table.add_column("seconds", justify="right")
    table.add_column("share", justify="right")
    for name, seconds in (
        ("generation (rollouts incl. target replies)", rollout.seconds),
        ("judging (reward design)", reward.seconds),
        ("update (logprobs, loss, backward, optimizer)", update),
        ("total", total),
    ):
        table.add_row(name, f"{seconds:.2f}", f"{seconds / total:.0%}")
    reward.runner.close()
    return table


def main(
    config: Annotated[
        Path, typer.Option(help="The config whose policy, prompt set and LoRA settings are used.")
    ] = CONFIG,
    groups: Annotated[int, typer.Option(help="Groups (prompts) per batch.")] = 2,
    group_size: Annotated[int, typer.Option(help="Rollouts per group.")] = 4,
    turns: Annotated[int, typer.Option(help="Auditor turns per episode (a report turn follows).")] = 2,
    tokens: Annotated[int, typer.Option(help="Sampled tokens per turn.")] = 32,
    out: Annotated[Path, typer.Option(help="Scratch run directory for the GRPO step.")] = Path("runs/bench-grpo-step"),
) -> None:
    torch.set_num_threads(1)
    cfg = _config(config, groups, group_size, turns, tokens)
    model, tokenizer = load_policy(cfg.policy)
    model.eval()
    with torch.no_grad():
        console.print(generation_table(cfg, model, ChatSegments(tokenizer)))
    console.print(step_table(cfg, out))


if __name__ == "__main__":
    typer.run(main)
