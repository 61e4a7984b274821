"""vLLM generation across two CPU processes (gloo) with unequal and vanishing live episodes per rank.

TRL's own `VLLMGeneration.generate` runs (server mode, and colocate mode with tensor parallelism over
both ranks), with a fake vLLM client or engine underneath. Each fake completion is a function of its
prompt, so the test can check that every turn of every episode got the completion of its own context.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from train_fakes import FakeEpisode, spawn_gloo

WORLD = 2
RANK_TURNS = {0: [2, 1, 1], 1: [1, 3, 3]}  # rank 0 has fewer live episodes from turn 2 and none at turn 3


def completion_of(prompt: list[int], eos: int) -> list[int]:
    """The fake engine's reply: three tokens derived from the whole prompt, then end of turn."""
    return [(sum(prompt) * 31 + k) % 1000 + 200 for k in range(3)] + [eos]


def logprob_of(k: int) -> float | None:
    """Every second token's logprob is missing (vLLM reports a NaN logprob as None)."""
    return None if k == 1 else -0.5


class FakeClient:
    """`trl vllm-serve`'s client: generates for the gathered prompts on the main process."""

    def __init__(self, eos: int) -> None:
        self.eos = eos

    def generate(self, prompts: list[list[int]], features: Any = None, n: int = 1, **_: Any) -> dict[str, Any]:
        assert n == 1
        ids = [completion_of(p, self.eos) for p in prompts]
        return {
            "prompt_ids": prompts,
            "completion_ids": ids,
            "logprobs": [[[logprob_of(k)] for k in range(len(c))] for c in ids],
            "logprob_token_ids": [[[t] for t in c] for c in ids],
        }


class FakeLLM:
    """A colocated vLLM engine: RequestOutput-shaped results for every prompt it is given."""

    def __init__(self, eos: int) -> None:
        self.eos = eos

    def generate(self, prompts: list[dict[str, Any]], sampling_params: Any, use_tqdm: bool) -> list[Any]:
        outputs = []
        for p in prompts:
            ids = completion_of(p["prompt_token_ids"], self.eos)
            lps = [{t: SimpleNamespace(logprob=logprob_of(k) or math.nan, rank=1)} for k, t in enumerate(ids)]
            outputs.append(
                SimpleNamespace(
                    prompt_token_ids=p["prompt_token_ids"], outputs=[SimpleNamespace(token_ids=ids, logprobs=lps)]
                )
            )
        return outputs


def trl_backend(mode: str, state: Any, eos: int) -> Any:
    """TRL's VLLMGeneration with its generation settings, but a fake client/engine instead of vLLM."""
    from trl.generation import vllm_generation

    backend = vllm_generation.VLLMGeneration.__new__(vllm_generation.VLLMGeneration)
    settings = dict(temperature=1.0, top_p=1.0, top_k=0, min_p=None, repetition_penalty=1.0, max_completion_length=8)
    settings.update(logprobs=0, structured_outputs_regex=None, generation_kwargs={}, enable_sleep_mode=False)
    backend.__dict__.update(settings, accelerator=state, mode=mode, _llm_weights_sleeping=False)
    if mode == "server":
        backend.vllm_client = FakeClient(eos)
    else:
        backend.__dict__.update(
            llm=FakeLLM(eos), tensor_parallel_size=WORLD, tp_group=None, model=torch.nn.Linear(1, 1)
        )
        vllm_generation.SamplingParams = dict  # not installed on CPU machines; the fake engine ignores it
    return backend


def _worker(rank: int, tokenizer_dir: str, out: str) -> None:
    import asyncio

    from accelerate import PartialState
    from transformers import AutoTokenizer

    from auditrl.train.rollout import ChatSegments, EpisodeRow, run_rollouts
    from auditrl.train.vllm_generator import VLLMTurnGenerator

    state = PartialState(cpu=True)
    segments = ChatSegments(AutoTokenizer.from_pretrained(tokenizer_dir))
    eos = segments.tokenizer.eos_token_id
    turns = RANK_TURNS[rank]
    rows = [
        EpisodeRow(behavior_id="flattery", seed_id=f"r{rank}e{i}", family="steady", benign=False)
        for i in range(len(turns))
    ]
    by_seed = {row.seed_id: n for row, n in zip(rows, turns, strict=True)}
    result: dict[str, Any] = {}
    for mode in ("server", "colocate"):
        batch = asyncio.run(
            run_rollouts(
                rows,
                lambda row: FakeEpisode(row, turns=by_seed[row.seed_id]),
                VLLMTurnGenerator(trl_backend(mode, state, eos), segments),
                segments,
                group_size=1,
                first_index=rank * len(rows),
                max_completion_tokens=512,
                auditor_name="policy",
            )
        )
        result[mode] = {
            "prompt_ids": batch.prompt_ids,
            "completion_ids": batch.completion_ids,
            "env_mask": batch.env_mask,
            "logprobs": batch.logprobs,
            "turns": [t.turns_used for t in batch.transcripts],
            "untrained": [t.metadata.get("tokens_without_logprob") for t in batch.transcripts],
        }
    Path(out, f"rank{rank}.json").write_text(json.dumps({"eos": eos, **result}))
    torch.distributed.barrier()  # leave together: a rank exiting while the other tears down gloo aborts it
    torch.distributed.destroy_process_group()


@pytest.mark.slow
def test_every_episode_gets_its_own_completion(tokenizer_dir: Path, tmp_path: Path) -> None:
    spawn_gloo(_worker, WORLD, str(tokenizer_dir), str(tmp_path))
    for rank in range(WORLD):
        data = json.loads((tmp_path / f"rank{rank}.json").read_text())
        for mode in ("server", "colocate"):
            got = data[mode]
            assert got["turns"] == RANK_TURNS[rank], (rank, mode)
            for prompt, completion, mask, lps, n in zip(
                got["prompt_ids"], got["completion_ids"], got["env_mask"], got["logprobs"], got["turns"], strict=True
            ):
                assert all(isinstance(x, float) and math.isfinite(x) for x in lps)
                context, position, replies = list(prompt), 0, 0
                while position < len(completion):
                    expected = completion_of(context, data["eos"])
                    if completion[position : position + 4] == expected:
                        assert mask[position : position + 4] == [
                            1,
                            0,
                            1,
                            1,
                        ]  # the token without a logprob is not trained
                        assert lps[position : position + 4] == [-0.5, 0.0, -0.5, -0.5]
                        context += expected
                        position += 4
                        replies += 1
                    else:
                        assert mask[position] == 0, (rank, mode, position)
                        context.append(completion[position])
                        position += 1
                assert replies == n
            assert got["untrained"] == RANK_TURNS[rank]  # one token without a logprob per turn
