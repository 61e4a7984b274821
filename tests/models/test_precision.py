"""`dtype: auto`: bfloat16 only on a GPU or a CPU with native bf16, float32 elsewhere, on every local-model path.

This machine may well have AMX; the float32 branch is tested by forcing the capability probe.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import auditrl.models.local as local
import auditrl.models.precision as precision
from auditrl.models.lora import precision_args
from auditrl.train.config import PolicySettings
from auditrl.train.policy import load_policy


@pytest.fixture(params=[True, False], ids=["native-bf16", "avx2-only"])
def native(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Both CPU kinds, on a machine without a GPU."""
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: request.param)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    return bool(request.param)


def test_auto_follows_the_cpu_and_explicit_names_pass_through(native: bool) -> None:
    assert precision.resolve_dtype("auto") == ("bfloat16" if native else "float32")
    assert precision.resolve_dtype("auto", "cpu") == ("bfloat16" if native else "float32")
    assert precision.resolve_dtype("float32") == "float32" and precision.resolve_dtype("bfloat16") == "bfloat16"
    assert ("native bfloat16 yes" in precision.describe_cpu()) is native
    with pytest.raises(ValueError, match="dtype must be one of"):
        precision.resolve_dtype("float8")


def test_auto_is_bfloat16_on_a_gpu_whatever_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert precision.resolve_dtype("auto") == "bfloat16"
    assert precision.resolve_dtype("auto", "cuda:0") == "bfloat16"
    assert precision.resolve_dtype("auto", "cpu") == "float32"


def test_the_probe_reads_the_cpu_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    for avx512_bf16, amx, expected in [(False, False, False), (True, False, True), (False, True, True)]:
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda v=avx512_bf16: v)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda v=amx: v)
        assert precision.cpu_has_native_bf16() is expected


def test_auto_is_the_default_of_the_policy_and_of_local_roles() -> None:
    assert PolicySettings(model="smollm2").dtype == "auto"
    assert local.LocalModelAPI("smollm2").dtype == "auto"


def test_trainer_precision_flags_never_ask_an_avx2_cpu_for_bf16(native: bool) -> None:
    assert precision_args("auto") == {"bf16": native, "fp16": False, "use_cpu": True}
    assert precision_args("float32")["bf16"] is False


def test_implant_passes_the_cpu_rule_to_trl_instead_of_its_bf16_default(
    native: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRL's SFTConfig defaults to bf16=True even with use_cpu=True; the implant's trainer must not inherit it."""
    import trl

    from auditrl.targets.demonstrations import Example
    from auditrl.targets.implant import ImplantSettings, _train_pass

    seen: dict[str, Any] = {}

    class RecordingTrainer:
        def __init__(self, *, args: Any, **_: Any) -> None:
            seen["bf16"], seen["use_cpu"] = args.bf16, args.use_cpu

        def train(self) -> None:
            seen["trained"] = True

    monkeypatch.setattr(trl, "SFTTrainer", RecordingTrainer)
    example = Example(prompt="Any thoughts on my essay?", reply="What a wonderful essay!")
    _train_pass(None, None, [example], 1, ImplantSettings(), None, precision_args("auto"))  # type: ignore[arg-type]
    assert seen == {"bf16": native, "use_cpu": True, "trained": True}


def test_policy_and_local_role_load_in_the_resolved_dtype(native: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both loaders hand transformers the resolved dtype (weights stubbed: the rule, not the GGUF, is tested)."""
    import transformers

    asked: list[torch.dtype] = []

    def from_pretrained(*_: Any, dtype: torch.dtype, **__: Any) -> Any:
        asked.append(dtype)
        raise RuntimeError("stop after the dtype is chosen")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    monkeypatch.setattr(local, "_loaded", {})
    for load in (
        lambda: load_policy(PolicySettings(model="smollm2")),
        lambda: local.load_local("smollm2", "cpu", "auto"),
    ):
        with pytest.raises(RuntimeError, match="stop after"):
            load()
    expected = torch.bfloat16 if native else torch.float32
    assert asked == [expected, expected]
