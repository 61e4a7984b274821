"""GRPO training of a language-model auditor with TRL's GRPOTrainer, peft LoRA and our episode engine.

The adapter between TRL and the audit world is deliberately thin, because TRL (pinned to 1.16 in
pyproject) labels its `rollout_func` hook experimental:
- the dataset holds one row per group (behavior, seed, family, benign) as a JSON prompt; TRL's sampler
  repeats each row `group_size` times and lays groups out consecutively across ranks;
- `AuditRolloutFunc` turns the rows into multi-turn audit episodes (auditrl.train.rollout) and returns
  token ids, env_mask and sampled logprobs, plus each episode's transcript as an extra field;
- `GroupReward` (TRL's reward function) gathers the transcripts of all ranks, checks that every group
  is complete and consecutive, scores each group with one reward design, stores every transcript with
  its step and reward, logs the reward-hacking monitors, and hands each rank its slice of rewards.
TRL then computes group-relative advantages, the clipped policy loss and the optional KL term (beta).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import time
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

import torch
from accelerate import PartialState
from accelerate.utils import broadcast_object_list, gather_object
from datasets import Dataset
from inspect_ai.model import Model
from peft import LoraConfig
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)
from trl import GRPOConfig, GRPOTrainer
from trl.distributed import DistributedBackend
from trl.models import unwrap_model_for_generation

from auditrl.atomic import atomic_write_text
from auditrl.behaviors.library import load_behaviors, load_seeds
from auditrl.behaviors.plant import target_system_prompt
from auditrl.behaviors.schema import Behavior, Seed
from auditrl.judges.client import JudgeClient
from auditrl.models.local import resolve_source
from auditrl.models.roles import resolve_model
from auditrl.rewards.batch import build_batch
from auditrl.rewards.designs import DetailedDesign, RewardDesign, RewardRecord
from auditrl.rewards.reference import ReferenceEntry, ReferenceStore
from auditrl.rewards.registry import PROGRAMMATIC_JUDGE, SIM_JUDGE, OfflineJudge, build_design
from auditrl.scaffold.engine import AuditEpisode, AuditSpec
from auditrl.scaffold.transcript import Budget, Transcript
from auditrl.train.checkpoint import (
    CHECKPOINTS_DIR,
    RunStateCallback,
    TranscriptLog,
    checkpoint_step,
    latest_checkpoint,
    read_state,
    rewind_monitors,
)
from auditrl.train.config import (
    EpisodeSettings,
    GRPOLMConfig,
    PolicySettings,
    load_config,
)
from auditrl.train.generation import Sample, TurnCache, cut_at_eos, generate_turn
from auditrl.train.monitors import (
    ORDER_DISAGREEMENT_KEY,
    MonitorLog,
    load_markers,
    step_metrics,
)
from auditrl.train.rollout import (
    ChatSegments,
    EpisodeFactory,
    EpisodeRow,
    TurnGenerator,
    check_groups,
    run_rollouts,
)

T = TypeVar("T")
REWARD_NAME = "audit_reward"
REFERENCES_FILE = "references.json"


class AsyncRunner:
    """One event loop for the whole run, so async model clients (targets, judges) keep a single loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def close(self) -> None:
        self.loop.close()


def distributed_state() -> PartialState:
    """The process layout, initialised as the Trainer will (CPU processes use gloo when no GPU is present)."""
    return PartialState(cpu=not torch.cuda.is_available())


def load_policy(settings: PolicySettings) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load the auditor model in a trainable state (a GGUF file is dequantised; its quantizer flags cleared)."""
    source = resolve_source(settings.model)
    gguf = settings.gguf_file or source.gguf_file
    kwargs: dict[str, Any] = {"gguf_file": gguf} if gguf else {}
    tokenizer = AutoTokenizer.from_pretrained(source.location, **kwargs)
    model_kwargs = dict(kwargs)
    if settings.attn_implementation:
        model_kwargs["attn_implementation"] = settings.attn_implementation
    model = AutoModelForCausalLM.from_pretrained(source.location, dtype=getattr(torch, settings.dtype), **model_kwargs)
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    if getattr(model, "is_quantized", False):
        model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    if tokenizer.chat_template is None:
        raise ValueError(f"policy.model '{settings.model}' has no chat template; use an instruction-tuned model")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def training_rows(cfg: GRPOLMConfig, behaviors: dict[str, Behavior], seeds: Sequence[Seed]) -> list[EpisodeRow]:
    """One row per group, `groups_per_step` rows per step from the batch builder (exact benign share per step,
    held-out behaviors refused), laid out step after step so TRL's unshuffled sampler keeps each batch."""
    data = cfg.data
    try:
        batches = [
            build_batch(
                behaviors,
                seeds,
                cfg.episodes.families,
                n_groups=data.groups_per_step,
                k=data.group_size,
                benign_fraction=data.benign_fraction,
                behavior_ids=data.behaviors,
                seed=cfg.seed,
                step=step,
            )
            for step in range(cfg.trainer.max_steps)
        ]
    except ValueError as exc:
        raise ValueError(f"{cfg.source}: field 'data': {exc}") from exc
    return [
        EpisodeRow(behavior_id=g.behavior_id, seed_id=g.seed.id, family=g.family, benign=g.benign)
        for batch in batches
        for g in batch.groups
    ]


class AuditEpisodeFactory:
    """Builds an AuditEpisode for a row: seed, plant (or benign prompt), budget and target model."""

    def __init__(
        self, settings: EpisodeSettings, behaviors: dict[str, Behavior], seeds: Sequence[Seed], auditor_name: str
    ) -> None:
        self.settings = settings
        self.behaviors = behaviors
        self.seeds = {s.id: s for s in seeds}
        self.auditor_name = auditor_name
        self._targets: dict[str, Model] = {}

    def target(self, family: str) -> tuple[str, Model]:
        spec = self.settings.target_model.replace("{family}", family)
        if spec not in self._targets:
            self._targets[spec] = resolve_model(spec, **self.settings.target_model_args)
        return spec, self._targets[spec]

    def __call__(self, row: EpisodeRow) -> AuditEpisode:
        behavior = None if row.benign or row.behavior_id is None else self.behaviors[row.behavior_id]
        spec_name, target = self.target(row.family)
        spec = AuditSpec(
            seed=self.seeds[row.seed_id],
            behavior=behavior,
            target_system_prompt=target_system_prompt(behavior),
            budget=Budget(max_turns=self.settings.max_turns),
            auditor_model=self.auditor_name,
            target_model=spec_name,
            target_family=row.family,
            tool_protocol=self.settings.tool_protocol,
        )
        return AuditEpisode(spec, target)


class HFTurnGenerator:
    """Per-turn batched sampling with the policy itself (left-padded `generate`), logprobs from its logits."""

    def __init__(self, trainer: GRPOTrainer, settings: EpisodeSettings, segments: ChatSegments) -> None:
        self.trainer = trainer
        self.segments = segments
        tok = segments.tokenizer
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        self.config = turn_generation_config(settings, self.pad_id, segments.eos_ids)
        self.cache = TurnCache() if settings.kv_cache else None

    def start(self) -> None:
        if self.cache is not None:
            self.cache.clear()

    def __call__(self, keys: list[int], contexts: list[list[int]]) -> list[Sample]:
        trainer = self.trainer
        with (
            unwrap_model_for_generation(
                trainer.model_wrapped,
                trainer.accelerator,
                gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
                gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
            ) as model,
            torch.no_grad(),
            DistributedBackend(trainer.accelerator).summon_full_params(trainer.model_wrapped, recurse=False),
        ):
            if not contexts:
                return []
            if self.cache is None:
                return generate_turn(model, contexts, self.config, self.pad_id, self.segments.eos_ids)
            return self.cache.generate(model, keys, contexts, self.config, self.pad_id, self.segments.eos_ids)


def turn_generation_config(settings: EpisodeSettings, pad_id: int, eos_ids: set[int]) -> GenerationConfig:
    """Sampling settings of one auditor turn (plain temperature/top-p sampling, raw logits kept)."""
    return GenerationConfig(
        do_sample=True,
        temperature=settings.temperature,
        top_p=settings.top_p,
        top_k=0,
        max_new_tokens=settings.max_new_tokens,
        pad_token_id=pad_id,
        eos_token_id=sorted(eos_ids),
        output_logits=True,
        return_dict_in_generate=True,
    )


class VLLMTurnGenerator:
    """Per-turn sampling through TRL's vLLM backend (colocated engine or a separate `trl vllm-serve`);
    vLLM's own prefix caching plays the part of TurnCache."""

    def __init__(self, trainer: GRPOTrainer, segments: ChatSegments) -> None:
        self.trainer = trainer
        self.segments = segments

    def start(self) -> None:
        return None

    def __call__(self, keys: list[int], contexts: list[list[int]]) -> list[Sample]:
        _, completion_ids, logprobs, _ = self.trainer.vllm_generation.generate(
            prompts=contexts, images=None, num_generations=1
        )
        return [
            cut_at_eos(list(ids), [float("nan") if lp[0] is None else lp[0] for lp in lps], self.segments.eos_ids)
            for ids, lps in zip(completion_ids, logprobs, strict=True)
        ]


class AuditRolloutFunc:
    """TRL rollout_func: runs this rank's slice of the generation batch as audit episodes."""

    def __init__(
        self,
        factory: EpisodeFactory,
        settings: EpisodeSettings,
        tokenizer: PreTrainedTokenizerBase,
        group_size: int,
        runner: AsyncRunner,
        auditor_name: str,
    ) -> None:
        self.factory = factory
        self.settings = settings
        self.segments = ChatSegments(tokenizer)
        self.group_size = group_size
        self.runner = runner
        self.auditor_name = auditor_name
        self.generator: TurnGenerator | None = None
        self.seconds = 0.0

    def bind(self, trainer: GRPOTrainer) -> TurnGenerator:
        """Choose the generation backend once the trainer exists."""
        if trainer.args.use_vllm:
            self.generator = VLLMTurnGenerator(trainer, self.segments)
        else:
            self.generator = HFTurnGenerator(trainer, self.settings, self.segments)
        return self.generator

    def __call__(self, prompts: list[Any], trainer: GRPOTrainer) -> dict[str, Any]:
        generator = self.generator or self.bind(trainer)
        rows = [EpisodeRow.model_validate_json(p) for p in prompts]
        first = trainer.accelerator.process_index * len(prompts)
        started = time.perf_counter()
        batch = self.runner.run(
            run_rollouts(
                rows,
                self.factory,
                generator,
                self.segments,
                group_size=self.group_size,
                first_index=first,
                max_completion_tokens=self.settings.max_completion_tokens,
                auditor_name=self.auditor_name,
            )
        )
        self.seconds += time.perf_counter() - started
        return batch.as_trl()


class GroupReward:
    """TRL reward function scoring whole groups with one reward design (see module docstring)."""

    __name__ = REWARD_NAME

    def __init__(
        self,
        design: RewardDesign,
        group_size: int,
        runner: AsyncRunner,
        log: TranscriptLog | None,
        monitors: MonitorLog | None,
        markers_path: Path | None = None,
    ) -> None:
        self.design = design
        self.group_size = group_size
        self.runner = runner
        self.log = log
        self.monitors = monitors
        self.markers = load_markers(markers_path)
        self.seconds = 0.0
        self.last_rewards: list[float | None] = []

    def __call__(
        self,
        prompts: list[str],
        completions: list[Any],
        transcript: list[Transcript],
        group_index: list[int],
        rollout_index: list[int],
        trainer_state: TrainerState,
        **_: Any,
    ) -> list[float | None]:
        started = time.perf_counter()
        everything = gather_object(list(zip(prompts, transcript, group_index, rollout_index, strict=True)))
        rows = [e[0] for e in everything]
        groups = [e[2] for e in everything]
        check_groups(rows, groups, self.group_size)
        step = trainer_state.global_step
        payload: list[Any] = [None]
        if PartialState().is_main_process:
            transcripts = [e[1] for e in everything]
            before = [len(c) for c in self._comparisons()]
            rewards = self._score(transcripts, step)
            new = [r for c, n in zip(self._comparisons(), before, strict=True) for r in c[n:]]
            for t, g, r, reward in zip(transcripts, groups, (e[3] for e in everything), rewards, strict=True):
                t.scores.update({"step": step, "group_index": g, "rollout_index": r, "reward": reward})
                t.scores.setdefault("reward_design", self.design.name)
                if self.log is not None:
                    self.log.append(t)
            if self.monitors is not None:
                values = step_metrics(transcripts, rewards, self.markers, position_disagreement(new))
                self.monitors.write(step, values, {"rollouts": len(rewards)})
            payload = [rewards]
        broadcast_object_list(payload, from_process=0)
        all_rewards: list[float | None] = payload[0]
        self.last_rewards = all_rewards
        start = PartialState().process_index * len(prompts)
        self.seconds += time.perf_counter() - started
        return all_rewards[start : start + len(prompts)]

    def _comparisons(self) -> list[list[Any]]:
        """Per part of the design, every pairwise comparison it has made so far (both orders each)."""
        return [getattr(part, "results", []) for part in design_parts(self.design)]

    def _score(self, transcripts: list[Transcript], step: int) -> list[float | None]:
        groups = [transcripts[i : i + self.group_size] for i in range(0, len(transcripts), self.group_size)]
        for part in design_parts(self.design):
            set_step = getattr(part, "set_step", None)
            if callable(set_step):
                set_step(step)
        detailed = getattr(self.design, "score_group_detailed", None)

        async def score_all() -> list[list[RewardRecord]]:
            if callable(detailed):
                return list(await asyncio.gather(*(detailed(g) for g in groups)))
            plain = await asyncio.gather(*(self.design.score_group(g) for g in groups))
            return [[RewardRecord(reward=v) for v in values] for values in plain]

        scored = self.runner.run(score_all())
        rewards: list[float | None] = []
        for group, records in zip(groups, scored, strict=True):
            if len(records) != len(group):
                raise RuntimeError(f"reward design {self.design.name} returned {len(records)} rewards for {len(group)}")
            for t, record in zip(group, records, strict=True):
                v = record.reward
                bad = v is None or math.isnan(v) or t.status == "error"
                rewards.append(None if bad else float(v))
                t.scores["reward_details"] = record.details
                consistent = record.details.get("consistent")
                if consistent is not None:
                    t.scores[ORDER_DISAGREEMENT_KEY] = 0.0 if consistent else 1.0
        return rewards


def position_disagreement(comparisons: Sequence[Any]) -> float | None:
    """Share of comparisons answered in both orders whose orders disagreed (None when there are none)."""
    answered = [c.consistent for c in comparisons if getattr(c, "consistent", None) is not None]
    return sum(not c for c in answered) / len(answered) if answered else None


def design_parts(design: Any) -> list[Any]:
    """A design and the designs it dispatches to (calibration mixing holds a planted and a benign design)."""
    parts = [design]
    for name in ("planted", "benign"):
        inner = getattr(design, name, None)
        if inner is not None:
            parts += design_parts(inner)
    return parts


def reference_store(design: Any) -> ReferenceStore | None:
    """The reference store a (reference-pairwise) design caches its references in, if any."""
    for part in design_parts(design):
        store = getattr(part, "store", None)
        if isinstance(store, ReferenceStore):
            return store
    return None


def make_design(cfg: GRPOLMConfig, run_dir: Path) -> DetailedDesign:
    """The configured reward design; its reference snapshots persist in the run directory."""
    offline: dict[str, OfflineJudge] = {PROGRAMMATIC_JUDGE: PROGRAMMATIC_JUDGE, SIM_JUDGE: SIM_JUDGE}
    judge: JudgeClient | OfflineJudge
    if cfg.reward.judge in offline:
        judge = offline[cfg.reward.judge]
    else:
        judge = JudgeClient(resolve_model(cfg.reward.judge, **cfg.reward.judge_args))
    store = ReferenceStore(run_dir / REFERENCES_FILE, refresh_every=cfg.reward.reference_refresh_steps)
    return build_design(
        cfg.reward.design,
        judge,
        benign_fraction=cfg.data.benign_fraction,
        references=store,
        extra_dimensions=cfg.reward.extra_dimensions,
    )


class StepProgress(TrainerCallback):
    """A rich progress bar over optimizer steps with the latest reward (main process only)."""

    def __init__(self, reward: GroupReward, console: Console | None = None) -> None:
        self.reward = reward
        self.progress = Progress(
            TextColumn("[bold]GRPO"),
            BarColumn(),
            TextColumn("step {task.completed}/{task.total}"),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
        )
        self.task: Any = None

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        if state.is_world_process_zero:
            self.progress.start()
            self.task = self.progress.add_task("train", total=state.max_steps, completed=state.global_step, info="")
        return control

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        if self.task is not None:
            judged = [r for r in self.reward.last_rewards if r is not None]
            info = f"reward {sum(judged) / len(judged):.3f}" if judged else "reward -"
            self.progress.update(self.task, completed=state.global_step, info=info)
        return control

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        if self.task is not None:
            self.progress.stop()
        return control


def grpo_arguments(cfg: GRPOLMConfig, run_dir: Path, world_size: int) -> GRPOConfig:
    """Map our config onto TRL's GRPOConfig: one generation batch (all groups of a step) per optimizer step."""
    t = cfg.trainer
    rollouts = cfg.data.group_size * cfg.data.groups_per_step
    per_pass = t.micro_batch_size * world_size
    if rollouts % per_pass:
        raise ValueError(
            f"{cfg.source}: group_size * groups_per_step = {rollouts} rollouts must split evenly over "
            f"{world_size} process(es) x trainer.micro_batch_size={t.micro_batch_size}"
        )
    accumulation = rollouts // per_pass
    kwargs: dict[str, Any] = {
        "output_dir": str(run_dir / CHECKPOINTS_DIR),
        "num_generations": cfg.data.group_size,
        "per_device_train_batch_size": t.micro_batch_size,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": accumulation,
        "max_completion_length": cfg.episodes.max_new_tokens,
        "temperature": cfg.episodes.temperature,
        "top_p": cfg.episodes.top_p,
        "beta": t.beta,
        "epsilon": t.epsilon,
        "num_iterations": t.num_iterations,
        "loss_type": t.loss_type,
        "scale_rewards": t.scale_rewards,
        "learning_rate": t.learning_rate,
        "max_steps": t.max_steps,
        "warmup_steps": t.warmup_steps,
        "max_grad_norm": t.max_grad_norm,
        "save_strategy": "steps",
        "save_steps": t.save_steps,
        "save_total_limit": t.save_total_limit,
        "logging_steps": t.logging_steps,
        "bf16": t.bf16,
        "gradient_checkpointing": t.gradient_checkpointing,
        "use_vllm": t.use_vllm,
        "vllm_mode": t.vllm_mode,
        "vllm_server_host": t.vllm_server_host,
        "vllm_server_port": t.vllm_server_port,
        "vllm_gpu_memory_utilization": t.vllm_gpu_memory_utilization,
        "report_to": t.report_to,
        "seed": cfg.seed,
        "data_seed": cfg.seed,
        "shuffle_dataset": False,
        "dataloader_num_workers": 0,
        "log_completions": False,
        "disable_tqdm": True,  # our rich StepProgress bar replaces the Trainer's tqdm bar
        "use_cpu": not torch.cuda.is_available(),
    }
    kwargs.update(t.extra)
    return GRPOConfig(**kwargs)


def build_trainer(
    cfg: GRPOLMConfig,
    run_dir: Path,
    *,
    factory: EpisodeFactory | None = None,
    design: RewardDesign | None = None,
    rows: Sequence[EpisodeRow] | None = None,
    policy: tuple[PreTrainedModel, PreTrainedTokenizerBase] | None = None,
) -> tuple[GRPOTrainer, AuditRolloutFunc, GroupReward]:
    """Wire model, LoRA, data, rollouts and rewards into a GRPOTrainer.

    `factory`, `design`, `rows` and `policy` default to what the config names; tests inject small ones.
    """
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    run_dir.mkdir(parents=True, exist_ok=True)
    state = distributed_state()
    model, tokenizer = policy if policy is not None else load_policy(cfg.policy)
    auditor_name = f"policy/{cfg.name}"
    if rows is None or factory is None:
        behaviors = load_behaviors(cfg.data.behavior_paths or None)
        seeds = load_seeds(cfg.data.seed_paths or None, behavior_ids=list(behaviors))
        rows = rows if rows is not None else training_rows(cfg, behaviors, seeds)
        factory = factory if factory is not None else AuditEpisodeFactory(cfg.episodes, behaviors, seeds, auditor_name)
    if design is None:
        design = make_design(cfg, run_dir)
    runner = AsyncRunner()
    log = TranscriptLog(run_dir) if state.is_main_process else None
    tensorboard = "tensorboard" in cfg.trainer.report_to
    monitors = MonitorLog(run_dir, tensorboard=tensorboard) if state.is_main_process else None
    reward = GroupReward(design, cfg.data.group_size, runner, log, monitors, cfg.monitors.markers)
    rollout = AuditRolloutFunc(factory, cfg.episodes, tokenizer, cfg.data.group_size, runner, auditor_name)
    lora = cfg.policy.lora
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=grpo_arguments(cfg, run_dir, state.num_processes),
        train_dataset=Dataset.from_dict({"prompt": [r.key for r in rows]}),
        processing_class=tokenizer,
        peft_config=LoraConfig(
            r=lora.r,
            lora_alpha=lora.alpha,
            lora_dropout=lora.dropout,
            target_modules=lora.target_modules,
            task_type="CAUSAL_LM",
        ),
        rollout_func=rollout,
        callbacks=[RunStateCallback(lambda: _design_state(reward.design))],
    )
    rollout.bind(trainer)
    return trainer, rollout, reward


def _design_state(design: RewardDesign) -> dict[str, Any]:
    store = reference_store(design)
    references = {k: e.model_dump(mode="json") for k, e in store.entries.items()} if store is not None else None
    return {"reward_design": design.name, "references": references}


def _restore_design(design: RewardDesign, state: dict[str, Any]) -> None:
    """Put back the reference snapshot as it was at the checkpoint (later refreshes were lost with the crash)."""
    store = reference_store(design)
    if store is not None and state.get("references") is not None:
        store.entries = {k: ReferenceEntry.model_validate(v) for k, v in state["references"].items()}
        store.save()


def train_run(
    cfg: GRPOLMConfig,
    run_dir: Path,
    *,
    factory: EpisodeFactory | None = None,
    design: RewardDesign | None = None,
    rows: Sequence[EpisodeRow] | None = None,
    policy: tuple[PreTrainedModel, PreTrainedTokenizerBase] | None = None,
    progress: bool = True,
) -> GRPOTrainer:
    """Train into `run_dir`, resuming from its latest checkpoint after a crash.

    Before resuming, rollouts and monitor records of steps at or after the checkpoint are set aside
    (see auditrl.train.checkpoint), so the logs hold each trained rollout exactly once.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    checkpoint = latest_checkpoint(run_dir)
    state = distributed_state()
    if state.is_main_process and checkpoint is not None:
        step = checkpoint_step(checkpoint)
        TranscriptLog(run_dir).rewind(step)
        rewind_monitors(run_dir, step)
    state.wait_for_everyone()
    trainer, _, reward = build_trainer(cfg, run_dir, factory=factory, design=design, rows=rows, policy=policy)
    if checkpoint is not None and state.is_main_process:
        _restore_design(reward.design, read_state(checkpoint))
    if progress:
        trainer.add_callback(StepProgress(reward))
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    if reward.monitors is not None:
        reward.monitors.close()
    reward.runner.close()
    return trainer


def run_from_config(config_path: Path, out_dir: Path | None = None) -> Path:
    """Train from a `grpo_lm` config file into `out_dir` (default `runs/<name>`); returns the run directory.

    Running again on the same directory resumes from its latest checkpoint.
    """
    cfg = load_config(Path(config_path))
    run_dir = Path(out_dir) if out_dir is not None else Path("runs") / cfg.name
    run_dir.mkdir(parents=True, exist_ok=True)
    if distributed_state().is_main_process and not (run_dir / "config.yaml").exists():
        shutil.copyfile(config_path, run_dir / "config.yaml")
    trainer = train_run(cfg, run_dir)
    trainer.save_model(str(run_dir / "adapter"))
    if PartialState().is_main_process:
        atomic_write_text(run_dir / "summary.json", json.dumps({"steps": trainer.state.global_step}))
    return run_dir
