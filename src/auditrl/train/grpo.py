"""GRPO training of a language-model auditor: TRL's GRPOTrainer, peft LoRA and our episode engine, assembled.

The adapter between TRL and the audit world is deliberately thin, because TRL (pinned to 1.16 in
pyproject) labels its `rollout_func` hook experimental:
- the dataset holds one row per group (behavior, seed, family, benign) as a JSON prompt; TRL's sampler
  repeats each row `group_size` times and lays groups out consecutively across ranks (auditrl.train.episodes);
- `AuditRolloutFunc` (auditrl.train.rollout_func) turns the rows into multi-turn audit episodes and returns
  token ids, env_mask and sampled logprobs, plus each episode's transcript as an extra field; the auditor's
  turns come from the policy (auditrl.train.hf_generator) or vLLM (auditrl.train.vllm_generator);
- `GroupReward` (auditrl.train.reward) gathers the transcripts of all ranks, scores each group with one
  reward design, stores every transcript with its step and reward, logs the reward-hacking monitors, and
  hands each rank its slice of rewards.
TRL then computes group-relative advantages, the clipped policy loss and the optional KL term (beta).
This module maps the config onto GRPOConfig, builds the trainer and resumes a crashed run.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from accelerate import PartialState
from datasets import Dataset
from peft import PeftModel
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from trl import GRPOConfig, GRPOTrainer
from trl.distributed import DistributedBackend

from auditrl.atomic import atomic_write_text
from auditrl.behaviors.library import load_behaviors
from auditrl.behaviors.schema import Behavior, Seed
from auditrl.models.lora import lora_config
from auditrl.rewards.records import RewardDesign
from auditrl.train.checkpoint import (
    CHECKPOINTS_DIR,
    RunStateCallback,
    StopOnNonFinite,
    TranscriptLog,
    checkpoint_step,
    discard_incomplete_checkpoints,
    latest_checkpoint,
    rewind_monitors,
)
from auditrl.train.config import ConfigFileError, GRPOLMConfig, check_plain, load_config
from auditrl.train.episodes import AuditEpisodeFactory, training_rows, training_seeds
from auditrl.train.extensions import NO_EXTENSION, RunSetup, TrainingExtension
from auditrl.train.layout import batch_layout
from auditrl.train.monitors import MonitorLog
from auditrl.train.outputs import ADAPTER_DIR, finalize_adapter
from auditrl.train.plan import check_fsdp_saves_adapter, check_snapshot_launch
from auditrl.train.policy import check_init_adapter, load_policy
from auditrl.train.progress import StepProgress
from auditrl.train.reward import GroupReward, make_design, reference_store
from auditrl.train.rollout import EpisodeFactory, EpisodeRow
from auditrl.train.rollout_func import AuditRolloutFunc
from auditrl.train.runtime import AsyncRunner, distributed_state
from auditrl.train.snapshot import SNAPSHOTS_DIR, PolicySnapshot
from auditrl.train.trainer import AuditGRPOTrainer


def grpo_arguments(cfg: GRPOLMConfig, run_dir: Path, world_size: int) -> GRPOConfig:
    """TRL's GRPOConfig: the trainer settings as they are, plus one generation batch (all groups of a step) per
    optimizer step, the episodes' sampling settings and what this adapter fixes (unshuffled data, our progress bar)."""
    t = cfg.trainer
    accumulation = batch_layout(cfg, world_size).accumulation
    kwargs: dict[str, Any] = {
        **t.model_dump(by_alias=True, exclude={"extra"}),
        "output_dir": str(run_dir / CHECKPOINTS_DIR),
        "num_generations": cfg.data.group_size,
        "gradient_accumulation_steps": accumulation,
        "steps_per_generation": accumulation,
        "max_completion_length": cfg.episodes.longest_turn,
        "temperature": cfg.episodes.temperature,
        "top_p": cfg.episodes.top_p,
        # explicit, so vLLM samples as the HF turns do (auditrl.train.hf_generator.NEUTRAL_SAMPLING)
        "top_k": 0,
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "save_strategy": "steps",
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
    extension: TrainingExtension = NO_EXTENSION,
) -> tuple[GRPOTrainer, AuditRolloutFunc, GroupReward]:
    """Wire model, LoRA, data, rollouts and rewards into a GRPOTrainer.

    `factory`, `design`, `rows` and `policy` default to what the config names; tests inject small ones.
    `extension` attaches an experiment's hooks (auditrl.train.extensions); the rows it chooses replace the
    config's only where the rows were not injected.
    """
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    run_dir.mkdir(parents=True, exist_ok=True)
    state = distributed_state(cfg.trainer.ddp_timeout)
    model, tokenizer = policy if policy is not None else load_policy(cfg.policy)
    auditor_name = f"policy/{cfg.name}"
    setup = RunSetup(cfg, run_dir, model, tokenizer, functools.partial(_sources, cfg))
    if rows is None:
        behaviors, seeds = setup.sources
        rows = extension.training_rows(training_rows(cfg, behaviors, seeds), setup)
    if factory is None:
        factory = AuditEpisodeFactory(cfg.episodes, *setup.sources, auditor_name)
    if design is None:
        design = make_design(cfg, run_dir)
    runner = AsyncRunner()
    log = TranscriptLog(run_dir) if state.is_main_process else None
    tensorboard = "tensorboard" in cfg.trainer.report_to
    monitors = MonitorLog(run_dir, tensorboard=tensorboard) if state.is_main_process else None
    extension.start(rows, setup)
    reward = GroupReward(
        design,
        cfg.data.group_size,
        runner,
        log,
        monitors,
        cfg.monitors.markers,
        cfg.reward.no_contact_reward,
        cfg.reward.benign_scale,
        extension=extension,
    )
    snapshot = (
        PolicySnapshot(run_dir / SNAPSHOTS_DIR, cfg.reward.reference_refresh_steps)
        if reference_store(design) is not None
        else None
    )
    rollout = AuditRolloutFunc(
        factory, cfg.episodes, tokenizer, cfg.data.group_size, runner, auditor_name, snapshot=snapshot,
        extension=extension,
    )  # fmt: skip
    trainer = AuditGRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=grpo_arguments(cfg, run_dir, state.num_processes),
        train_dataset=Dataset.from_dict({"prompt": [r.key for r in rows]}),
        processing_class=tokenizer,
        peft_config=None if isinstance(model, PeftModel) else lora_config(cfg.policy.lora, model),  # warm start
        rollout_func=rollout,
        callbacks=[RunStateCallback(lambda: _design_state(reward.design)), StopOnNonFinite()],
        extension=extension,
    )
    if trainer.is_fsdp_enabled:
        check_fsdp_saves_adapter(str(trainer.accelerator.state.fsdp_plugin.state_dict_type), "the accelerate launch")
    if snapshot is not None:
        backend = DistributedBackend(trainer.accelerator)
        check_snapshot_launch(cfg, backend.is_zero3 or backend.is_fsdp)
    rollout.bind(trainer)
    return trainer, rollout, reward


def _sources(cfg: GRPOLMConfig) -> tuple[dict[str, Behavior], list[Seed]]:
    """The config's behaviors and training seeds."""
    behaviors = load_behaviors(cfg.data.behavior_paths or None)
    return behaviors, training_seeds(cfg, behaviors)


def _design_state(design: RewardDesign) -> dict[str, Any]:
    """The design a checkpoint was trained with (its references are regenerated from the snapshot each step)."""
    return {"reward_design": design.name}


def train_run(
    cfg: GRPOLMConfig,
    run_dir: Path,
    *,
    factory: EpisodeFactory | None = None,
    design: RewardDesign | None = None,
    rows: Sequence[EpisodeRow] | None = None,
    policy: tuple[PreTrainedModel, PreTrainedTokenizerBase] | None = None,
    progress: bool = True,
    extension: TrainingExtension = NO_EXTENSION,
) -> GRPOTrainer:
    """Train into `run_dir`, resuming from its latest checkpoint after a crash.

    Before resuming, rollouts and monitor records of steps at or after the checkpoint are set aside
    (see auditrl.train.checkpoint), so the logs hold each trained rollout exactly once.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    checkpoint = latest_checkpoint(run_dir)
    state = distributed_state(cfg.trainer.ddp_timeout)
    if state.is_main_process:
        # a run killed before its first complete checkpoint restarts from step 0, so its logs rewind too
        discard_incomplete_checkpoints(run_dir)
        step = checkpoint_step(checkpoint) if checkpoint is not None else 0
        TranscriptLog(run_dir).rewind(step)
        rewind_monitors(run_dir, step)
    state.wait_for_everyone()
    trainer, _, reward = build_trainer(
        cfg, run_dir, factory=factory, design=design, rows=rows, policy=policy, extension=extension
    )
    if progress:
        trainer.add_callback(StepProgress(reward))
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    if reward.monitors is not None:
        reward.monitors.close()
    reward.runner.close()
    return trainer


def run_from_config(
    config_path: Path, out_dir: Path | None = None, extension: TrainingExtension = NO_EXTENSION
) -> Path:
    """Train from a `grpo_lm` config file into `out_dir` (default `runs/<name>`); returns the run directory.

    Running again on the same directory resumes from its latest checkpoint.
    """
    cfg = load_config(Path(config_path))
    if extension is NO_EXTENSION:
        check_plain(cfg, config_path, "auditrl train")
    if cfg.policy.init_adapter is not None:
        try:
            check_init_adapter(cfg.policy)  # before the run directory exists: a wrong warm start writes nothing
        except ValueError as exc:
            raise ConfigFileError(f"{config_path}: {exc}") from exc
    run_dir = Path(out_dir) if out_dir is not None else Path("runs") / cfg.name
    run_dir.mkdir(parents=True, exist_ok=True)
    if distributed_state(cfg.trainer.ddp_timeout).is_main_process and not (run_dir / "config.yaml").exists():
        shutil.copyfile(config_path, run_dir / "config.yaml")
    trainer = train_run(cfg, run_dir, extension=extension)
    trainer.save_model(str(run_dir / ADAPTER_DIR))
    if PartialState().is_main_process:
        finalize_adapter(run_dir / ADAPTER_DIR, cfg.policy)
        atomic_write_text(run_dir / "summary.json", json.dumps({"steps": trainer.state.global_step}))
    return run_dir
