"""A `grpo_lm` config with implant directories among its target families: the dry run counts the local targets'
weights, a config naming an unusable implant fails in one line, and a step trains against the implant on a CPU."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml
from train_fakes import tiny_policy
from typer.testing import CliRunner

from auditrl.behaviors.plant import render_benign
from auditrl.cli import app
from auditrl.models.local import set_adapter_base, smollm2_source
from auditrl.scaffold.store import TRANSCRIPTS, read_transcripts
from auditrl.train.config import load_config
from auditrl.train.grpo import train_run
from auditrl.train.memory import DTYPE_BYTES, GIB, model_shape

runner = CliRunner()


def _config(path: Path, families: list[str], **episodes: Any) -> Path:
    cfg = {
        "kind": "grpo_lm",
        "name": "implant-targets",
        "seed": 2,  # its first step has planted and benign groups on each family
        "policy": {"model": "smollm2", "lora": {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}},
        "episodes": {"target_model": "{family}", "families": families, "max_turns": 1, "max_new_tokens": 12,
                     "max_completion_tokens": 512, "tool_protocol": "text", **episodes},
        "data": {"behaviors": ["flattery", "defer_to_users"], "group_size": 2, "groups_per_step": 4},
        "reward": {"design": "reference_pairwise", "judge": "programmatic"},
        "trainer": {"max_steps": 1, "micro_batch_size": 1, "save_steps": 1, "report_to": [],
                    "extra": {"logging_strategy": "no"}},
    }  # fmt: skip
    path.write_text(yaml.safe_dump(cfg))
    return path


def _dry_run(config: Path, out: Path) -> tuple[int, str, dict[str, Any]]:
    result = runner.invoke(app, ["train", "--dry-run", "--config", str(config), "--json", str(out)])
    return result.exit_code, result.output, json.loads(out.read_text()) if out.is_file() else {}


def test_dry_run_counts_each_implant_and_the_base_its_benign_groups_audit(tiny_implant: Path, tmp_path: Path) -> None:
    implants = []
    for name in ("a", "b"):  # two implants on SmolLM2 (the packaged shape table knows it): weights are not loaded
        implants.append(Path(shutil.copytree(tiny_implant, tmp_path / name)))
        set_adapter_base(implants[-1], "smollm2")
    families = [f"local/{d}" for d in implants] + ["sim/steady"]
    code, output, data = _dry_run(_config(tmp_path / "run.yaml", families), tmp_path / "plan.json")
    assert code == 0, output
    plan = data["plan"]
    shape = model_shape("smollm2")
    assert shape is not None
    # each implant is SmolLM2 with its adapter merged in, and benign groups load SmolLM2 itself: three copies
    expected = 3 * shape.params * DTYPE_BYTES["auto"] / GIB
    assert plan["target weights (local)"] == f"{expected:,.2f} GiB"
    local = plan["local targets"]
    assert local.startswith("3 in-process model(s) at auto: ") and "unknown" not in local
    assert f"local/{implants[0]} (smollm2 with its adapter merged in)" in local
    parts = [float(v.removesuffix(" GiB").replace(",", "")) for k, v in plan.items() if v.endswith(" GiB")]
    total = float(plan["total (training)"].removesuffix(" GiB").replace(",", ""))
    assert abs(sum(parts) - 2 * total) < 0.02  # the total counts the targets with the policy's parts

    code, _, data = _dry_run(_config(tmp_path / "fp32.yaml", families, target_model_args={"dtype": "float32"}),
                             tmp_path / "fp32.json")  # fmt: skip
    assert code == 0 and data["plan"]["target weights (local)"] == f"{2 * expected:,.2f} GiB"
    gguf = smollm2_source()  # a GGUF file has no config.json to read a shape from: named, and left out of the total
    code, _, data = _dry_run(_config(tmp_path / "gguf.yaml", [f"local/{gguf.location}/{gguf.gguf_file}"]),
                             tmp_path / "gguf.json")  # fmt: skip
    assert code == 0 and "target weights (local)" not in data["plan"]
    assert data["plan"]["local targets"].endswith("(size unknown: not in the total)")


def test_a_config_naming_an_unusable_implant_fails_in_one_line(tiny_implant: Path, tmp_path: Path) -> None:
    broken = Path(shutil.copytree(tiny_implant, tmp_path / "broken"))
    (broken / "implant.json").write_text("{}")
    config = _config(tmp_path / "run.yaml", ["sim/steady", f"local/{broken}"])
    code, output, _ = _dry_run(config, tmp_path / "plan.json")
    assert code == 2 and "Traceback" not in output
    line = " ".join(output.split())
    assert f"{config}: field 'episodes.families.1': local/{broken}: " in line and "field 'behavior'" in line
    assert not (tmp_path / "plan.json").exists()


def test_one_step_trains_against_an_implant_and_a_prompted_target_on_cpu(
    tiny_implant: Path, tiny_local_model: Path, tokenizer_dir: Path, tmp_path: Path
) -> None:
    implant, base = f"local/{tiny_implant}", f"local/{tiny_local_model}"
    cfg = load_config(_config(tmp_path / "run.yaml", [implant, "sim/steady"]))
    run_dir = tmp_path / "run"
    trainer = train_run(cfg, run_dir, policy=tiny_policy(tokenizer_dir), progress=False)
    assert trainer.state.global_step == 1
    stored = read_transcripts(run_dir / TRANSCRIPTS)
    assert len(stored) == 8 and all(t.status != "error" for t in stored), [t.error for t in stored]
    on_implant = [t for t in stored if t.target_family == implant]
    planted = [t for t in on_implant if not t.benign]
    assert planted and len(planted) < len(on_implant)
    for t in on_implant:
        # planted: the implant, its record's behavior, the persona alone; benign: its base model, the same prompt
        assert (t.target_model, t.behavior_id) == ((base, None) if t.benign else (implant, "flattery"))
        assert t.target_system_prompt == render_benign()
        assert t.scores["reward"] is not None
    prompted = [t for t in stored if t.target_family == "sim/steady" and not t.benign]
    assert prompted and all(t.target_system_prompt != render_benign() for t in prompted)
