"""Small stand-ins for the trainer tests: a deterministic episode, a reward design and a tiny policy.

They satisfy the same contracts as the real engine (step-able episode) and reward designs, so the
tests exercise the TRL adapter itself quickly, without judges or a target model.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as mp
from inspect_ai.model import ChatMessage, ChatMessageAssistant, ChatMessageSystem, ChatMessageUser
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerBase

from auditrl.rewards.records import RewardRecord, group_scorer
from auditrl.scaffold.transcript import AuditorMessage, Report, Transcript
from auditrl.train.config import GRPOLMConfig
from auditrl.train.rollout import EpisodeRow


class FakeEpisode:
    """An episode of `turns` auditor turns; after each turn but the last, the environment adds one user message."""

    opening: str | None = None

    def __init__(self, row: EpisodeRow, turns: int = 2) -> None:
        self.turns = turns
        self.done = False
        self.phase = "report" if turns == 1 else "audit"
        self.messages: list[ChatMessage] = [
            ChatMessageSystem(content="You are an auditor."),
            ChatMessageUser(content=f"Audit the target for seed {row.seed_id}."),
        ]
        self.transcript = Transcript(
            auditor_model="policy",
            target_model="fake",
            target_family=row.family,
            behavior_id=row.behavior_id,
            seed_id=row.seed_id,
            seed_instructions="probe",
        )

    def auditor_messages(self) -> list[ChatMessage]:
        return list(self.messages)

    async def step(self, output: ChatMessageAssistant, output_tokens: int | None = None) -> None:
        turn = self.transcript.turns_used
        self.messages.append(output)
        self.transcript.auditor_messages.append(AuditorMessage(turn=turn, role="assistant", content=output.text))
        self.transcript.turns_used += 1
        if self.transcript.turns_used == self.turns - 1:
            self.phase = "report"
        if self.transcript.turns_used >= self.turns:
            self.done = True
            self.phase = "done"
            self.transcript.report = Report(no_behavior_found=len(output.text) % 2 == 0)
            return
        self.messages.append(ChatMessageUser(content=f"Target reply {turn}: nothing unusual."))


class LengthDesign:
    """Reward = characters the auditor wrote (distinct per rollout, so advantages are nonzero)."""

    name = "length"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    @group_scorer
    async def score_group(self, group: Sequence[Transcript]) -> list[RewardRecord]:
        self.calls.append([t.seed_id for t in group])
        return [RewardRecord(reward=float(sum(len(m.content) for m in t.auditor_messages))) for t in group]


def tiny_policy(tokenizer_dir: Path) -> tuple[LlamaForCausalLM, PreTrainedTokenizerBase]:
    """A one-layer Llama over SmolLM2's tokenizer: real tokens and chat template, seconds to train."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    if (
        tokenizer.pad_token is None
    ):  # transformers 5.17 reads SmolLM2's GGUF tokenizer without one (as load_policy does)
        tokenizer.pad_token = tokenizer.eos_token
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    return LlamaForCausalLM(config), tokenizer


def tiny_config(**trainer: object) -> GRPOLMConfig:
    """1-2 turns, <= 24 new tokens, groups of 2, 2 groups per step, CPU, no TensorBoard."""
    return GRPOLMConfig.model_validate(
        {
            "kind": "grpo_lm",
            "name": "tiny",
            "seed": 0,
            "policy": {"model": "smollm2", "lora": {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}},
            "episodes": {"max_turns": 2, "max_new_tokens": 12, "max_completion_tokens": 512},
            "data": {"group_size": 2, "groups_per_step": 2},
            "trainer": {
                "max_steps": 1,
                "learning_rate": 1e-2,
                "save_steps": 1,
                "report_to": [],
                "extra": {"logging_strategy": "no"},
                **trainer,
            },
        }
    )


def rows_for(steps: int, groups: int) -> list[EpisodeRow]:
    return [
        EpisodeRow(
            behavior_id=None if g % 2 else "flattery", seed_id=f"s{step}_{g}", family="steady", benign=bool(g % 2)
        )
        for step in range(steps)
        for g in range(groups)
    ]


class BrevityDesign:
    """Reward = minus the characters the auditor wrote over all its turns (brevity)."""

    name = "brevity"

    @group_scorer
    async def score_group(self, group: Sequence[Transcript]) -> list[RewardRecord]:
        return [
            RewardRecord(reward=-float(sum(len(m.content) for m in t.auditor_messages if m.role == "assistant")))
            for t in group
        ]


def engine_config(auditor_prompt: str = "compact") -> GRPOLMConfig:
    """Real episodes (two turns + report) against sim targets; tiny budgets, temperature 0.7."""
    return GRPOLMConfig.model_validate(
        {
            "kind": "grpo_lm",
            "name": "learn",
            "seed": 0,
            "policy": {
                "model": "smollm2",
                "lora": {"r": 8, "alpha": 16, "target_modules": ["q_proj", "v_proj", "o_proj", "down_proj"]},
            },
            "episodes": {
                "target_model": "sim/{family}",
                "families": ["steady", "chatty"],
                "max_turns": 2,
                "max_new_tokens": 12,
                "max_completion_tokens": 1024,
                "temperature": 0.7,
                "auditor_prompt": auditor_prompt,
            },
            "data": {"group_size": 4, "groups_per_step": 2, "benign_fraction": 0.5},
            "trainer": {
                "max_steps": 1,
                "learning_rate": 3e-2,
                "save_steps": 1000,
                "report_to": [],
                "extra": {"logging_strategy": "no"},
            },
        }
    )


def _gloo_process(rank: int, world: int, port: int, worker: Callable[..., None], args: tuple[Any, ...]) -> None:
    os.environ.update(
        {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank), "LOCAL_RANK": str(rank),
         "WORLD_SIZE": str(world), "OMP_NUM_THREADS": "1"}
    )  # fmt: skip
    torch.set_num_threads(1)
    worker(rank, *args)


PRELOAD = ["train_fakes", "auditrl.train.grpo", "auditrl.train.rollout", "auditrl.train.vllm_generator"]
"""What every rank imports, imported once in the fork server: spawned ranks paid 5-8 CPU-s of imports each."""


def spawn_gloo(worker: Callable[..., None], world: int, *args: Any) -> None:
    """Run `worker(rank, *args)` in `world` CPU processes set up to form one process group on a free local port.

    The ranks are forked from a fork server that imported `PRELOAD` once for the whole test run: a fresh process
    (what `spawn` starts) for every rank of every test repeated the torch/transformers/TRL imports each time. The
    server is a single-threaded process of its own, so forking it is as safe as spawning."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    multiprocessing.set_forkserver_preload(PRELOAD)
    mp.start_processes(
        _gloo_process, args=(world, port, worker, args), nprocs=world, join=True, start_method="forkserver"
    )
