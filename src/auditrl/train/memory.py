"""GPU memory and token room of a `grpo_lm` run, estimated from the model's shape (no weights, no GPU).

The figures catch a plan that cannot fit; they do not replace a measurement. Training memory follows
mixed-precision AdamW on the LoRA weights and activations after Korthikanti et al. (2022) with sdpa
attention. TRL's fused LM head never materialises a (tokens x vocabulary) logits tensor: it projects
tiles of at most `TOKEN_CHUNK_SIZE` tokens by `_CHUNKED_LOGPROB_CHUNK_SIZE` vocabulary entries, so only
one tile counts. vLLM's KV room is what its memory share leaves after the weights and its own reserve;
when the live tokens of a step exceed it, vLLM preempts sequences and recomputes them later.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field

from auditrl.configfile import load_yaml
from auditrl.train.config import GRPOLMConfig
from auditrl.train.layout import BatchLayout, Launch

GIB = 1024**3
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "auto": 2}
"""Bytes per weight; the plan is for GPUs, where `auto` is bfloat16 (auditrl.models.precision)."""
FP32 = 4
ADAM_STATES = 2
PROMPT_TOKENS = {"full": 2048, "compact": 768, "guided": 768, "guided_evidence": 768}
"""Upper bounds on an audit's opening prompt (system prompt with the longest shipped seed, tool list, first
user message), by prompt set: 1,469 and 486 tokens measured with SmolLM2's tokenizer (a test keeps the bound)."""
VLLM_RESERVED_GIB = 2.0
"""What vLLM keeps beside weights and KV cache (CUDA graphs, the activation peak it profiles at start-up);
an assumption: vLLM logs the measured figure at start-up as its available KV cache memory."""
VLLM_SERVER_MEMORY_UTILIZATION = 0.9
"""`trl vllm-serve`'s default `--gpu_memory_utilization`."""


class ModelShape(BaseModel):
    """A decoder-only transformer's size, as far as memory is concerned."""

    model_config = ConfigDict(extra="forbid")

    params: int = Field(description="Total parameters.")
    layers: int = Field(description="Decoder layers.")
    hidden: int = Field(description="Hidden size.")
    heads: int = Field(description="Attention heads.")
    kv_heads: int = Field(description="Key/value heads (grouped-query attention).")
    head_dim: int = Field(description="Width of one head.")
    intermediate: int = Field(description="MLP width.")
    vocab: int = Field(description="Vocabulary size.")
    context: int = Field(description="Longest sequence the model takes (max_position_embeddings).")

    def module_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of the linear layers LoRA can target, per decoder layer."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return {
            "q_proj": (self.hidden, q),
            "k_proj": (self.hidden, kv),
            "v_proj": (self.hidden, kv),
            "o_proj": (q, self.hidden),
            "gate_proj": (self.hidden, self.intermediate),
            "up_proj": (self.hidden, self.intermediate),
            "down_proj": (self.intermediate, self.hidden),
        }

    def kv_bytes_per_token(self, dtype: str) -> int:
        """Keys and values of one token over all layers."""
        return 2 * self.layers * self.kv_heads * self.head_dim * DTYPE_BYTES[dtype]


def model_shape(model: str) -> ModelShape | None:
    """The shape of a policy: the packaged table, else a local config.json (directory or HF cache); None if neither."""
    table = load_yaml(resources.files("auditrl.train").joinpath("data/model_shapes.yaml").read_text("utf-8"))
    if model in table:
        return ModelShape.model_validate(table[model])
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(model, local_files_only=True)
    except (OSError, ValueError):
        return None
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    shape = ModelShape(
        params=0,
        layers=config.num_hidden_layers,
        hidden=config.hidden_size,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate=config.intermediate_size,
        vocab=config.vocab_size,
        context=config.max_position_embeddings,
    )
    per_layer = sum(i * o for i, o in shape.module_shapes().values())
    embeddings = shape.vocab * shape.hidden * (1 if getattr(config, "tie_word_embeddings", False) else 2)
    return shape.model_copy(update={"params": shape.layers * per_layer + embeddings})


def sequence_tokens(cfg: GRPOLMConfig) -> int:
    """The longest rollout sequence: the opening prompt's bound plus the rollout cap."""
    return PROMPT_TOKENS[cfg.episodes.auditor_prompt] + cfg.episodes.max_completion_tokens


def kv_cache_copies(shape: ModelShape) -> float:
    """Peak copies of the live key/value cache during HF generation: one, plus one layer's while it is copied or
    grown (TurnCache moves caches layer by layer; a growing cache is re-allocated one layer at a time)."""
    return 1 + 1 / shape.layers


def lm_head_tile_tokens() -> tuple[int, int]:
    """Tokens x vocabulary entries of one tile of TRL's fused LM head (TRL 1.16's constants)."""
    from trl.kernels.chunked_logprob import TOKEN_CHUNK_SIZE
    from trl.trainer.utils import _CHUNKED_LOGPROB_CHUNK_SIZE

    return TOKEN_CHUNK_SIZE, _CHUNKED_LOGPROB_CHUNK_SIZE


def lora_params(cfg: GRPOLMConfig, shape: ModelShape) -> int:
    modules = shape.module_shapes()
    r = cfg.policy.lora.r
    layers = min(cfg.policy.lora.last_layers or shape.layers, shape.layers)
    return layers * sum(r * (modules[m][0] + modules[m][1]) for m in cfg.policy.lora.target_modules if m in modules)


def memory_gib(cfg: GRPOLMConfig, shape: ModelShape, layout: BatchLayout, launch: Launch) -> dict[str, float]:
    """Estimated GPU memory per training rank, by part (GiB). The KV cache is HF generation's (0 with vLLM)."""
    dtype = DTYPE_BYTES[cfg.policy.dtype]
    seq = sequence_tokens(cfg)
    lora = lora_params(cfg, shape)
    optimizer_share = layout.processes if launch.shards_optimizer else 1
    tokens = layout.micro_batch_size * seq
    per_layer_activations = (2 if cfg.trainer.gradient_checkpointing else 34) * tokens * shape.hidden
    tile_tokens, tile_vocab = lm_head_tile_tokens()
    head = min(tokens, tile_tokens) * min(shape.vocab, tile_vocab) * dtype + tokens * shape.hidden * FP32
    live = layout.rollouts_per_rank * seq * shape.kv_bytes_per_token(cfg.policy.dtype)
    return {
        "policy weights": shape.params * dtype / (layout.processes if launch.shards_weights else 1) / GIB,
        "LoRA weights + grads": lora * 2 * FP32 / GIB,
        "optimizer (AdamW)": lora * ADAM_STATES * FP32 / optimizer_share / GIB,
        "activations": shape.layers * per_layer_activations / GIB,
        "LM head (TRL's fused tiles)": head / GIB,
        "KV cache (HF generation)": 0.0 if cfg.trainer.use_vllm else live * kv_cache_copies(shape) / GIB,
    }


def local_targets(cfg: GRPOLMConfig) -> tuple[str, float | None] | None:
    """The `local/` targets each rank loads beside the policy (auditrl.targets.pool) at their model args' dtype: a plan
    row and their weights in GiB (None when a shape or the dtype is unknown); None when no target is local."""
    from auditrl.targets.pool import TargetPool

    pool, benign = TargetPool(cfg.episodes.target_model, cfg.episodes.families), cfg.data.benign_fraction > 0
    dtype = str(cfg.episodes.target_model_args.get("dtype", "auto"))
    shapes = [model_shape(weights) for weights in pool.local_weights(benign).values()]
    known = dtype in DTYPE_BYTES and None not in shapes
    gib = sum(s.params for s in shapes if s) * DTYPE_BYTES[dtype] / GIB if known else None
    return (pool.describe_local(benign, dtype, known), gib) if shapes else None


@dataclass(frozen=True)
class KVRoom:
    """vLLM's key/value cache room against the tokens a step keeps live in it."""

    where: str
    share_gib: float
    room_tokens: int
    live_tokens: int

    @property
    def preempts(self) -> bool:
        return self.live_tokens > self.room_tokens


def vllm_kv_room(cfg: GRPOLMConfig, shape: ModelShape, layout: BatchLayout) -> KVRoom | None:
    """Colocated: each rank's engine holds its own live rollouts; server (one GPU, `trl vllm-serve` defaults):
    it holds every rank's. None without vLLM."""
    t = cfg.trainer
    if not t.use_vllm:
        return None
    gpu = cfg.launch.gpu_memory_gib
    colocate = t.vllm_mode == "colocate"
    share = (t.vllm_gpu_memory_utilization if colocate else VLLM_SERVER_MEMORY_UTILIZATION) * gpu
    weights = shape.params * DTYPE_BYTES[cfg.policy.dtype] / GIB
    room = max(0.0, share - weights - VLLM_RESERVED_GIB) * GIB
    rollouts = layout.rollouts_per_rank if colocate else layout.rollouts
    return KVRoom(
        where="each rank's colocated engine" if colocate else "the vLLM server (one GPU)",
        share_gib=share,
        room_tokens=int(room // shape.kv_bytes_per_token(cfg.policy.dtype)),
        live_tokens=rollouts * sequence_tokens(cfg),
    )
