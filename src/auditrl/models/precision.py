"""Which floating-point type a local model is loaded and trained in: bfloat16 only where it is fast.

On a CPU without native bfloat16 (AVX2 only, or AVX512 without its BF16 extension) every bf16 matmul is
emulated: one ran at 1.2 GFLOP/s against 71 in float32, about 60x slower. With AVX512-BF16 or AMX,
bf16 matmuls ran about 4x faster than float32. `auto` therefore takes bfloat16 on a GPU and on CPUs with
native bf16, and float32 everywhere else. Every path that loads or trains a local model resolves its
dtype here (GRPO's policy, `auditrl sft`, `auditrl implant`, `local/` roles), so one rule holds for all.

torch is imported inside the functions: configs and the launch plan name dtypes without loading it.
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

DType = Literal["auto", "float32", "bfloat16", "float16"]
DTYPES: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")
AUTO = "auto"


def cpu_has_native_bf16() -> bool:
    """True when this CPU computes bfloat16 matmuls in hardware (AVX512-BF16 or AMX tiles)."""
    import torch

    cpu = torch.cpu
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(cpu, name)()) for name in probes if hasattr(cpu, name))


def on_gpu(device: str | torch.device = "auto") -> bool:
    """Whether a model placed on `device` runs on a GPU (`auto`: whenever CUDA is available)."""
    import torch

    kind = str(device)
    if kind == AUTO:
        return torch.cuda.is_available()
    return torch.device(kind).type == "cuda"


def resolve_dtype(dtype: str, device: str | torch.device = "auto") -> str:
    """The concrete dtype name for `dtype` on `device`: `auto` -> bfloat16 on a GPU or a native-bf16 CPU,
    else float32; any other name is returned as it is."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if dtype != AUTO:
        return dtype
    return "bfloat16" if on_gpu(device) or cpu_has_native_bf16() else "float32"


def torch_dtype(dtype: str, device: str | torch.device = "auto") -> torch.dtype:
    """`resolve_dtype` as a torch dtype, for `from_pretrained(dtype=...)`."""
    import torch

    return getattr(torch, resolve_dtype(dtype, device))


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), else what the platform reports."""
    info = Path("/proc/cpuinfo")
    if info.is_file():
        for line in info.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    return platform.processor() or platform.machine()


def describe_cpu() -> str:
    """One line naming the CPU and what decided the dtype, for benchmarks to print beside their timings."""
    import torch

    native = cpu_has_native_bf16()
    return (
        f"{cpu_name()}: capability {torch.backends.cpu.get_cpu_capability()}, native bfloat16 "
        f"{'yes (AVX512-BF16 or AMX)' if native else 'no'}; dtype auto -> {resolve_dtype(AUTO, 'cpu')} on CPU"
    )
