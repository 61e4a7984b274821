"""The one-GPU smoke test: three GRPO steps of `configs/gpu_single_vllm.yaml` on CUDA in bf16, then its adapter
evaluated by `auditrl suite`, printing one line per check (PASS, FAIL or SKIP). `scripts/gpu_smoke.sh` runs it
on a machine prepared by `scripts/prepare_gpu_smoke.py`.

The one-GPU config keeps its trainer settings (bf16, gradient checkpointing, LoRA on every projection,
reference pairwise with a frozen snapshot, micro batches of 2); what an offline machine cannot have is swapped
for the prepared model (SmolLM2 cut to a few layers) and AuditWorld's text targets and judges, with budgets
of seconds: 2 groups of 4 rollouts, 2 turns of 32 tokens, a new reference snapshot after step 2, a
checkpoint at step 2. Generation is HF's (TurnCache); vLLM colocate runs too where vLLM is installed.

    python scripts/gpu_smoke.py --model .gpu_smoke/model/<file>.gguf --out runs/gpu-smoke
    python scripts/gpu_smoke.py ... --device cpu     # a rehearsal of the same steps on a CPU (says so)
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
BASE_CONFIG = ROOT / "configs" / "gpu_single_vllm.yaml"
STEPS = 3
SAVE_STEPS = 2
REFRESH_STEPS = 2
ROLLOUTS = 8


class Checks:
    """One printed line per check; a failed check is reported and the run goes on where it can."""

    def __init__(self) -> None:
        self.failed = 0

    def run(self, name: str, check: Callable[[], str]) -> bool:
        started = time.perf_counter()
        try:
            detail = check()
        except Skip as skip:
            print(f"SKIP {name}: {skip}", flush=True)
            return False
        except Exception as exc:  # noqa: BLE001 - every failure becomes its line
            self.failed += 1
            print(f"FAIL {name}: {type(exc).__name__}: {' '.join(str(exc).split())[:400]}", flush=True)
            return False
        print(f"PASS {name}: {detail} ({time.perf_counter() - started:.1f} s)", flush=True)
        return True


class Skip(Exception):
    """A check that cannot run here, with the reason."""


def smoke_config(model: Path, gpu_memory_gib: float, vllm: bool) -> dict[str, Any]:
    """The one-GPU config with the offline model, AuditWorld targets and judges, and seconds-long budgets."""
    raw = yaml.safe_load(BASE_CONFIG.read_text())
    raw["name"] = "gpu-smoke-vllm" if vllm else "gpu-smoke"
    raw["policy"]["model"] = str(model.resolve())
    raw["policy"].pop("chat_template", None)  # SmolLM2's own template renders earlier turns unchanged
    raw["episodes"].update(
        target_model="sim/{family}", families=["steady", "chatty"], max_turns=2, max_new_tokens=32,
        max_completion_tokens=1024, temperature=0.7, auditor_prompt="guided",
    )  # fmt: skip
    raw["data"].update(group_size=4, groups_per_step=ROLLOUTS // 4)
    raw["reward"].update(judge="sim", reference_refresh_steps=REFRESH_STEPS)
    trainer = raw["trainer"]
    trainer.update(
        max_steps=1 if vllm else STEPS, save_steps=SAVE_STEPS, learning_rate=1e-4, report_to=[], use_vllm=vllm
    )
    trainer["extra"] = {"vllm_max_model_length": 4096} if vllm else {}
    trainer["vllm_gpu_memory_utilization"] = 0.3
    raw["launch"] = {"gpu_memory_gib": gpu_memory_gib}
    return raw


def train(config: dict[str, Any], run_dir: Path) -> Any:
    """`auditrl train`'s own path (run_from_config), keeping the trainer it built for the checks."""
    import auditrl.train.grpo as grpo

    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir.parent / f"{config['name']}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    kept: list[Any] = []
    original = grpo.train_run

    def keep(*args: Any, **kwargs: Any) -> Any:
        trainer = original(*args, **kwargs)
        kept.append(trainer)
        return trainer

    grpo.train_run = keep
    try:
        with (run_dir / "train.log").open("w") as log, contextlib.redirect_stdout(log):
            grpo.run_from_config(path, run_dir)
    finally:
        grpo.train_run = original
    return kept[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="the prepared GGUF file")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "gpu-smoke")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help="cpu: a rehearsal, not a GPU result")
    args = parser.parse_args()
    import torch

    checks = Checks()
    cuda = args.device == "cuda"
    state: dict[str, Any] = {}

    def device() -> str:
        if not cuda:
            return "REHEARSAL ON A CPU: nothing below is a GPU result"
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        props = torch.cuda.get_device_properties(0)
        state["gpu_gib"] = props.total_memory / 1024**3
        return (
            f"{props.name}, {state['gpu_gib']:.1f} GiB, torch {torch.__version__}, CUDA {torch.version.cuda}, "
            f"bf16 {torch.cuda.is_bf16_supported()}"
        )

    def imports() -> str:
        import accelerate
        import inspect_ai
        import peft
        import transformers
        import trl

        from auditrl.models.hf_cache import cache_field

        return (
            f"transformers {transformers.__version__} (generation cache: {cache_field()}), trl {trl.__version__}, "
            f"peft {peft.__version__}, accelerate {accelerate.__version__}, inspect_ai {inspect_ai.__version__}"
        )

    if not checks.run("device", device) or not checks.run("imports", imports):
        return 1
    config = smoke_config(args.model, state.get("gpu_gib", 140.4), vllm=False)
    run_dir = args.out / "hf"

    def plan() -> str:
        from auditrl.train.config import GRPOLMConfig
        from auditrl.train.plan import dry_run

        result = dry_run(GRPOLMConfig.model_validate(config))
        return f"{BASE_CONFIG.name} with smoke overrides plans for 1 process; warnings: {result.warnings or 'none'}"

    def training() -> str:
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        started = time.perf_counter()
        trainer = train(config, run_dir)
        seconds = time.perf_counter() - started
        state["trainer"] = trainer
        weights = next(p for n, p in trainer.model.named_parameters() if "lora_" not in n)
        want = "cuda" if cuda else "cpu"
        if trainer.state.global_step != STEPS or weights.device.type != want or weights.dtype != torch.bfloat16:
            raise RuntimeError(f"step {trainer.state.global_step}, weights on {weights.device} in {weights.dtype}")
        peak = f", peak GPU memory {torch.cuda.max_memory_allocated() / 1024**3:.2f} GiB" if cuda else ""
        norms = [round(e["grad_norm"], 4) for e in trainer.state.log_history if "grad_norm" in e]
        return (
            f"{STEPS} GRPO steps on {weights.device} in {weights.dtype}, bf16={trainer.args.bf16}, HF generation, "
            f"{seconds:.0f} s{peak}; gradient norms {norms}"
        )

    def rollouts() -> str:
        from auditrl.scaffold.store import TRANSCRIPTS

        lines = [json.loads(line) for line in (run_dir / TRANSCRIPTS).read_text().splitlines() if line.strip()]
        steps = sorted({t["scores"]["step"] for t in lines})
        rewards = [t["scores"]["reward"] for t in lines if t["scores"].get("reward") is not None]
        if len(lines) != STEPS * ROLLOUTS or steps != list(range(STEPS)):
            raise RuntimeError(f"{len(lines)} rollouts stored for steps {steps}")
        reached = sum(bool(t.get("target_messages")) for t in lines)
        return (
            f"{len(lines)} rollouts stored over steps {steps}, {len(rewards)} rewarded (range {min(rewards):.2f}-"
            f"{max(rewards):.2f}), {reached} reached the target"
        )

    def snapshot() -> str:
        from safetensors.torch import load_file

        from auditrl.train.reward import REFERENCES_FILE
        from auditrl.train.snapshot import SNAPSHOTS_DIR, PolicySnapshot, adapter_parameters

        folder = run_dir / SNAPSHOTS_DIR
        first, second = (
            load_file(str(folder / "step-000000.safetensors")),
            load_file(str(folder / f"step-{REFRESH_STEPS:06d}.safetensors")),
        )
        played = {entry["step"] for entry in json.loads((run_dir / REFERENCES_FILE).read_text())["references"].values()}
        if played != {REFRESH_STEPS}:
            raise RuntimeError(f"the last references were played by the snapshots of steps {played}")
        model = state["trainer"].model
        own = {n: p.detach().clone() for n, p in adapter_parameters(model).items()}
        probe = PolicySnapshot(folder, REFRESH_STEPS)
        generator = torch.Generator().manual_seed(0)
        probe.weights = {n: torch.randn(p.shape, generator=generator) for n, p in own.items()}
        with probe.swapped_in(model):
            inside = all(
                torch.equal(p, probe.weights[n].to(p.device, p.dtype)) for n, p in adapter_parameters(model).items()
            )
        after = all(torch.equal(p, own[n]) for n, p in adapter_parameters(model).items())
        if not (inside and after):
            raise RuntimeError(f"swap: snapshot in place {inside}, policy restored {after}")
        moved = max((second[n].float() - first[n].float()).abs().max().item() for n in first)
        device = next(iter(own.values())).device
        return (
            f"snapshots at steps 0 and {REFRESH_STEPS}, "
            f"step {REFRESH_STEPS}'s references played by the step-{REFRESH_STEPS} "
            f"snapshot; {len(own)} LoRA tensors swapped in and restored exactly on {device}; the adapter moved "
            f"{moved:.2e} between the snapshots"
        )

    def update() -> str:
        """The GRPO loss of a fresh trainer's batch back-propagates through the fused LM head and the checkpointed
        layers, with advantages set at random: a few-layer model's audits tie their references, so the training
        steps' own advantages may all be 0."""
        from auditrl.train.config import load_config
        from auditrl.train.grpo import build_trainer

        trainer, _, reward = build_trainer(load_config(args.out / f"{config['name']}.yaml"), args.out / "update")
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps
        rows = [row for row in trainer.train_dataset["prompt"][:2] for _ in range(4)]
        inputs = trainer._generate_and_score_completions([{"prompt": row} for row in rows])
        inputs["advantages"] = torch.randn(inputs["advantages"].shape, generator=torch.Generator().manual_seed(0)).to(
            inputs["advantages"].device
        )
        trainer.model.zero_grad()
        loss = trainer._compute_loss(trainer.model, inputs)
        loss.backward()
        grads = [p.grad for n, p in trainer.model.named_parameters() if "lora_" in n and p.grad is not None]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float()) for g in grads])).item()
        reward.runner.close()
        if not grads or not torch.isfinite(torch.tensor(norm)) or norm == 0:
            raise RuntimeError(f"LoRA gradient norm {norm} over {len(grads)} tensors")
        return f"loss {loss.item():.4f}, LoRA gradient norm {norm:.3e} over {len(grads)} tensors, finite"

    def checkpoint() -> str:
        from auditrl.train.checkpoint import CHECKPOINTS_DIR

        folder = run_dir / CHECKPOINTS_DIR / f"checkpoint-{SAVE_STEPS}"
        needed = ["adapter_model.safetensors", "optimizer.pt", "trainer_state.json"]
        missing = [n for n in needed if not (folder / n).is_file()]
        if missing or not list(folder.glob("rng_state*.pth")):
            raise RuntimeError(f"{folder} lacks {missing or 'its RNG state'}")
        step = json.loads((folder / "trainer_state.json").read_text())["global_step"]
        return f"{folder.relative_to(args.out)}: adapter, optimizer, RNG state, trainer state at step {step}"

    def suite() -> str:
        from auditrl.train.outputs import ADAPTER_DIR

        adapter = run_dir / ADAPTER_DIR
        out = args.out / "suite"
        command = [
            sys.executable, "-m", "auditrl.cli", "suite", "--auditor", f"local/{adapter}", "--target", "sim/steady",
            "--judge", "programmatic", "--rollouts", "1", "--seeds-per-behavior", "1", "--max-turns", "2",
            "--benign-max-turns", "2", "--production-seeds", "0", "--max-tokens", "32", "--auditor-prompt", "guided",
            "--concurrency", "4", "--out", str(out),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
        (args.out / "suite.log").write_text(done.stdout + done.stderr)
        if done.returncode != 0:
            raise RuntimeError(f"auditrl suite exited {done.returncode}: {(done.stdout + done.stderr)[-300:]}")
        row = json.loads((out / "results.json").read_text())[0]
        audits = sum(1 for line in (out / "transcripts.jsonl").read_text().splitlines() if line.strip())
        return (
            f"local/{adapter.relative_to(args.out)} audited {audits} times ({row['errored']} errored), composite "
            f"{row['composite']['mean']:.1f} over {row['composite']['n']} "
            "(a 4-layer model: a pipeline check, not a score)"
        )

    def vllm_colocate() -> str:
        if importlib.util.find_spec("vllm") is None:
            raise Skip(
                "vLLM is not installed here and cannot travel: its wheel with its CUDA kernels and its own "
                "requirements (flashinfer, xgrammar, ...) is hundreds of MB, the machine gets 64 MiB and no index"
            )
        trainer = train(smoke_config(args.model, state.get("gpu_gib", 140.4), vllm=True), args.out / "vllm")
        return f"{trainer.state.global_step} GRPO step with vLLM colocate (TRL colocate mode, weights synced)"

    checks.run("plan", plan)
    if checks.run("train", training):
        checks.run("rollouts", rollouts)
        checks.run("reference snapshot swap", snapshot)
        checks.run("update path", update)
        checks.run("checkpoint", checkpoint)
        checks.run("suite on the adapter", suite)
    checks.run("vllm colocate", vllm_colocate)
    print(f"{'FAILED' if checks.failed else 'OK'}: {checks.failed} check(s) failed", flush=True)
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
