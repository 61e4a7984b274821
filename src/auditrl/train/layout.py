"""How a launch spreads a `grpo_lm` run: the processes and how the accelerate file distributes them (`Launch`), and
how one step's rollouts split over processes and passes (`BatchLayout`); read by the plan and the memory estimate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from auditrl.train.config import ConfigFileError, GRPOLMConfig, read_yaml_mapping

SHARDED_PARAMS = ("FSDP",)
"""accelerate distributed types that shard the policy's weights (DeepSpeed: ZeRO stage 3 only)."""
FULL_STATE_DICT = "FULL_STATE_DICT"


@dataclass(frozen=True)
class Launch:
    """How many processes train, and how the accelerate file distributes them."""

    processes: int
    distributed_type: str
    zero_stage: int | None
    source: str
    fsdp_state_dict_type: str | None = None

    @property
    def shards_weights(self) -> bool:
        return self.distributed_type in SHARDED_PARAMS or self.zero_stage == 3

    @property
    def shards_optimizer(self) -> bool:
        return self.distributed_type in SHARDED_PARAMS or self.zero_stage is not None


def read_launch(cfg: GRPOLMConfig, processes: int | None = None) -> Launch:
    """The launch the config names (its accelerate file, then `launch.num_processes`), or `processes` if given."""
    path = cfg.launch.accelerate_config
    raw: dict[str, Any] = read_yaml_mapping(path) if path is not None else {}
    count = raw.get("num_processes", 1)
    if not isinstance(count, int) or count < 1:
        raise ConfigFileError(f"{path}: field 'num_processes' must be a positive integer (got {count!r})")
    deepspeed = raw.get("deepspeed_config") or {}
    stage = deepspeed.get("zero_stage") if raw.get("distributed_type") == "DEEPSPEED" else None
    chosen = processes or cfg.launch.num_processes or count
    source = (
        "--processes"
        if processes
        else ("launch.num_processes" if cfg.launch.num_processes else (path.name if path else "default"))
    )
    kind = str(raw.get("distributed_type", "NO"))
    state_dict = None
    if kind == "FSDP":
        fsdp = raw.get("fsdp_config") or {}
        # accelerate's default when the file names none: FULL_STATE_DICT under FSDP 1, SHARDED_STATE_DICT under FSDP 2
        default = FULL_STATE_DICT if str(fsdp.get("fsdp_version", 1)) == "1" else "SHARDED_STATE_DICT"
        state_dict = str(fsdp.get("fsdp_state_dict_type", default))
    return Launch(chosen, kind, stage, source, state_dict)


@dataclass(frozen=True)
class BatchLayout:
    """How one optimizer step's rollouts spread over processes and forward/backward passes."""

    processes: int
    rollouts: int
    group_size: int
    micro_batch_size: int

    @property
    def rollouts_per_rank(self) -> int:
        return self.rollouts // self.processes

    @property
    def groups_per_rank(self) -> float:
        return self.rollouts_per_rank / self.group_size

    @property
    def accumulation(self) -> int:
        return self.rollouts // (self.micro_batch_size * self.processes)


def batch_layout(cfg: GRPOLMConfig, processes: int) -> BatchLayout:
    """The layout for `processes` ranks; raises ValueError naming the fields when TRL could not split the batch."""
    rollouts = cfg.data.group_size * cfg.data.groups_per_step
    micro = cfg.trainer.micro_batch_size
    if rollouts % (micro * processes):
        fits = [p for p in range(1, rollouts + 1) if rollouts % (micro * p) == 0]
        raise ValueError(
            f"{cfg.source}: data.group_size * data.groups_per_step = {rollouts} rollouts per step must split evenly "
            f"over {processes} process(es) x trainer.micro_batch_size={micro}; with this micro batch, process counts "
            f"that fit are {', '.join(map(str, fits))}"
        )
    return BatchLayout(processes, rollouts, cfg.data.group_size, micro)
