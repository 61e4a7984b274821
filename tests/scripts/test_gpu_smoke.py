"""The GPU smoke test's preparation (model cut, slimmed wheels) and its config, checked on a CPU."""

from __future__ import annotations

import importlib.util
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from auditrl.models.local import CACHE_DIR_ENV, load_local, smollm2_source
from auditrl.train.config import GRPOLMConfig
from auditrl.train.plan import dry_run

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_slimmed_wheel_drops_members_and_their_record_lines(tmp_path: Path) -> None:
    prepare = _script("prepare_gpu_smoke")
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("pkg/__init__.py", "x = 1\n")
        z.writestr("pkg/binaries/tool", b"\0" * 10_000)
        z.writestr("pkg-1.0.dist-info/RECORD", "pkg/__init__.py,sha256=a,6\npkg/binaries/tool,sha256=b,10000\n")
    assert prepare.slim(wheel, prepare.re.compile(r"pkg/binaries/")) > 0
    with zipfile.ZipFile(wheel) as z:
        assert z.namelist() == ["pkg/__init__.py", "pkg-1.0.dist-info/RECORD"]
        assert z.read("pkg-1.0.dist-info/RECORD").decode() == "pkg/__init__.py,sha256=a,6\n"


@pytest.mark.slow
def test_cut_model_keeps_the_tokenizer_and_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))  # its conversion stays out of the user cache
    prepare = _script("prepare_gpu_smoke")
    source = smollm2_source()
    target = tmp_path / "cut.gguf"
    prepare.truncated_model(Path(source.location) / str(source.gguf_file), target, layers=2)
    assert target.stat().st_size < 25 * 1024**2
    loaded = load_local(str(target))
    assert loaded.model.config.num_hidden_layers == 2
    tokenizer = loaded.tokenizer
    assert tokenizer.eos_token == "<|im_end|>" and len(tokenizer) == 49152
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text.endswith("<|im_start|>assistant\n")


def test_smoke_config_is_the_one_gpu_config_offline(tmp_path: Path) -> None:
    smoke = _script("gpu_smoke")
    model = tmp_path / "cut.gguf"
    for vllm in (False, True):
        raw = smoke.smoke_config(model, 140.4, vllm=vllm)
        cfg = GRPOLMConfig.model_validate(raw)
        assert cfg.policy.dtype == "bfloat16" and cfg.trainer.bf16 and cfg.trainer.gradient_checkpointing
        assert cfg.reward.design == "reference_pairwise" and cfg.trainer.use_vllm is vllm
        assert cfg.episodes.target_model == "sim/{family}" and cfg.reward.judge == "sim"
    plan = dry_run(GRPOLMConfig.model_validate(smoke.smoke_config(model, 140.4, vllm=False)))
    assert plan.warnings == []
