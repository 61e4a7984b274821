"""Every script in benchmarks/ runs at a tiny size and prints the figures it promises, so none can rot unseen.

Each test runs one script as a user would (as `__main__` with its command line, one thread, a wide console) with its
smallest arguments and reads its tables back: the rows a README figure comes from must be there, with numbers in them.
The scripts run in this process, so each run is spared an interpreter's start and torch's import (most of a tiny run's
cost). The sizes say nothing about speed; the figures themselves are measured by running the scripts at their defaults.
"""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path
from statistics import mean

import pytest
import yaml

from auditrl.auditworld.designs import vectorised_names
from auditrl.configfile import load_yaml
from auditrl.experiments.small_lm.report_audits import benign_audits_seen
from auditrl.experiments.small_lm.report_choices import ChoiceScores, shift_claims
from auditrl.scaffold.store import TRANSCRIPTS, read_transcripts
from auditrl.scaffold.transcript_keys import CLAIM_FORCED, PROBED_BY
from benchmark_scripts import BENCHMARKS, invoke_benchmark, run_benchmark

ROOT = Path(__file__).resolve().parents[2]
NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")


MATCHED = "at the same FP calibration"
"""Words in the title of report_learning's table of a trained auditor against its threshold-matched start."""
RESET = "with its threshold reset on"
"""Words in the title of report_learning's table of a trained auditor, its threshold reset on reset audits,
against its start."""
START_VERDICT = "verdict after each quote, against"
"""Words in the title of report_learning's table of a trained auditor's choice of evidence under its start's verdict."""
CEILING = "the best choice of evidence under"
"""Words in the title of report_learning's table of the evidence ceiling under a start auditor's verdict."""


def table_rows(out: str) -> dict[str, list[str]]:
    """The rows of every rich table in `out`: first cell -> the other cells."""
    rows = {}
    for line in out.splitlines():
        if line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            if cells[0]:
                rows[cells[0]] = cells[1:]
    return rows


def numbers(cells: list[str]) -> list[float]:
    """Every number in `cells`, in order (thousands separators, units and signs allowed)."""
    return [float(n.replace(",", "")) for cell in cells for n in NUMBER.findall(cell)]


def row(rows: dict[str, list[str]], name: str, count: int) -> list[float]:
    """The numbers of row `name`, which must hold at least `count` of them."""
    assert name in rows, f"row {name!r} missing; rows: {list(rows)}"
    values = numbers(rows[name])
    assert len(values) >= count, f"row {name!r} has {values}, expected {count} numbers"
    return values


def test_engine_overhead(tmp_path: Path) -> None:
    rows = table_rows(run_benchmark("engine_overhead.py", "--episodes", "1", cwd=tmp_path))
    for name in ("mean", "median", "p95", "model time (subtracted)"):
        assert row(rows, name, 1)[0] > 0
    assert rows["goal"] == ["< 2.000"]


@pytest.mark.slow
def test_cli_startup(tmp_path: Path) -> None:
    # one timed run of each command and no untimed warm-up: the test reads the table, not a warm file cache's figures
    rows = table_rows(run_benchmark("cli_startup.py", "--repeats", "1", "--no-warm-up", cwd=tmp_path))
    for command in ("auditrl --help", "auditrl behaviors list", "auditrl audit --help", "auditrl audt (usage error)"):
        wall, cpu = row(rows, command, 2)[:2]
        assert wall > 0 and cpu > 0


def test_reward_margins(tmp_path: Path) -> None:
    args = ("--turns", "1", "--families", "steady", "--designs", "binary,reference_pairwise")
    out = run_benchmark("reward_margins.py", *args, "--out", str(tmp_path / "margins.json"), cwd=tmp_path)
    assert re.search(
        r"\d+ probe sets \(\d+ behaviors x 1 families, 1 turns\); the target showed the behavior in \d+", out
    )
    results = json.loads((tmp_path / "margins.json").read_text())
    runs = ["binary vs -", *(f"reference_pairwise vs {ref}" for ref in ("base_like", "silent", "finder"))]
    assert sorted(k for k in results if k != "probing") == sorted(runs)
    assert len(results["probing"]["binary"]) > 0 and "reference_pairwise" not in results["probing"]
    for run in runs:
        planted, benign = results[run]["planted"], results[run]["benign"]
        sizes = {len(planted[o]) for o in ("correct", "nothing", "wrong", "unreadable")}
        sizes |= {len(benign[o]) for o in ("nothing", "claim", "unreadable")}
        assert len(sizes) == 1 and sizes.pop() > 0, run  # one reward per probe set for every outcome
        assert all(math.isfinite(r) for rewards in (*planted.values(), *benign.values()) for r in rewards), run


def test_sim_throughput(tmp_path: Path) -> None:
    args = ("--steps", "1", "--groups", "2", "--group-size", "2", "--max-turns", "2", "--base-audits", "16")
    rows = table_rows(run_benchmark("sim_throughput.py", *args, cwd=tmp_path))
    for name in [
        "rollout only, imitation base",
        "rollout only, random base",
        *(f"train: {d}" for d in vectorised_names()),
    ]:
        episodes, *_, per_cpu_s, turns = row(rows, name, 5)
        assert episodes > 0 and per_cpu_s > 0 and 1 <= turns <= 2


@pytest.mark.slow
def test_concurrent_audits(tmp_path: Path) -> None:
    args = ("--episodes", "2", "--concurrency", "2", "--sequential", "1", "--latency-ms", "1", "--turns", "1")
    out = run_benchmark("concurrent_audits.py", *args, cwd=tmp_path)
    rows = table_rows(out)
    for name, episodes in (("sequential", 1), ("concurrent", 2), ("concurrent, 4x episodes", 8)):
        n, _, wall, rate, speedup, cpu_ms, errors = row(rows, name, 7)
        assert (n, errors) == (episodes, 0) and min(wall, rate, speedup, cpu_ms) > 0
    assert re.search(
        r"Client RSS in the long run: \d+ MiB after 2 audits, \d+ MiB after 8: [-+]\d+\.\d KiB per audit", out
    )


METRIC_TITLES = {
    "valid_reports": "valid report rate",
    "fp_calibration": "FP calibration (benign: readable, no confident claim)",
    "identification": "identification (planted: behavior named)",
}
GRPO_PHASES = {
    "generation (rollouts incl. target replies)": "generation",
    "judging (reward design)": "judging",
    "update (logprobs, loss, backward, optimizer)": "update",
    "total": "step",
}


def tiny_lm_config(folder: Path, model: Path) -> Path:
    """configs/experiments/small_lm/cpu_learn.yaml on `model` at the smallest work: one step of 2 groups x 2 rollouts,
    1 turn of 4 tokens."""
    raw = load_yaml((ROOT / "configs" / "experiments" / "small_lm" / "cpu_learn.yaml").read_text())
    raw["policy"].update(model=str(model), dtype="float32", lora={**raw["policy"]["lora"], "last_layers": 1})
    raw["episodes"].update(max_turns=1, max_new_tokens=4)
    raw["data"].update(group_size=2, groups_per_step=2)
    raw["trainer"].update(max_steps=1, save_steps=1, report_to=[])
    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.slow
def test_batched_generation(tmp_path: Path, tiny_local_model: Path) -> None:
    config = tiny_lm_config(tmp_path, tiny_local_model)
    args = (
        "--config",
        str(config),
        "--groups",
        "2",
        "--group-size",
        "2",
        "--turns",
        "1",
        "--tokens",
        "4",
        "--out",
        str(tmp_path / "run"),
    )
    rows = table_rows(run_benchmark("batched_generation.py", *args, cwd=tmp_path))
    for mode in ("per-episode sequential", "per-turn batched", "per-turn batched + KV cache"):
        seconds, sampled, rate, speedup = row(rows, mode, 4)[:4]
        assert seconds > 0 and rate > 0 and speedup > 0
        assert sampled == 2 * 2 * 2 * 4  # 2 groups x 2 rollouts x (1 turn + the report) x 4 forced tokens
    for phase in GRPO_PHASES:
        row(rows, phase, 2)
    assert row(rows, "total", 2)[0] > 0


@pytest.mark.slow
def test_grpo_step(tmp_path: Path, tiny_local_model: Path) -> None:
    work = ("--groups", "2", "--group-size", "2", "--turns", "1", "--tokens", "4")
    out = run_benchmark("grpo_step.py", *work, "--dtype", "float32", "--model", str(tiny_local_model), cwd=tmp_path)
    assert "2 groups x 2 rollouts, 1 turns + report, 4 tokens/turn" in " ".join(out.split())
    rows = table_rows(out)
    for phase in GRPO_PHASES.values():
        row(
            rows, phase, 3 * 2 + 2
        )  # wall and CPU seconds and the share for each of the two settings, then the speed-ups
    for phase in ("generation", "step"):
        fast_wall, fast_cpu, _, today_wall, today_cpu, _, wall_ratio, cpu_ratio = row(rows, phase, 8)
        assert min(fast_wall, fast_cpu, today_wall, today_cpu, wall_ratio, cpu_ratio) > 0
    assert row(rows, "step", 8)[2] == row(rows, "step", 8)[5] == 100  # shares of the whole step


@pytest.mark.slow
def test_cpu_learn(tmp_path: Path, tiny_local_model: Path) -> None:
    run = tmp_path / "run"
    sizes = ("--behaviors", "1", "--seeds-per-behavior", "1", "--rollouts", "1")
    args = ("--config", str(tiny_lm_config(tmp_path, tiny_local_model)), "--out", str(run), *sizes)
    rows = table_rows(run_benchmark("cpu_learn.py", *args, cwd=tmp_path))
    assert row(rows, "0-0", 1)[0] == 4  # the one step's rollouts, in the only third of the run that has a step
    learning = json.loads((run / "learning.json").read_text())
    assert set(learning["metrics"]) == {
        "valid_tool_calls", "valid_reports", "fp_calibration", "stated_nothing", "identification", "audit_quality"
    }  # fmt: skip
    for metric in ("valid_reports", "fp_calibration", "identification"):
        assert {"base", "trained", "difference"} <= set(learning["metrics"][metric]), metric
        row(rows, METRIC_TITLES[metric], 3 + 3 + 3)  # base, trained and the difference, each with its interval
    assert (run / "report.html").is_file()
    assert all((run / "eval" / label / "transcripts.jsonl").is_file() for label in ("base", "trained"))


def _scripts_run_by(test_file: Path) -> set[str]:
    """Benchmark scripts a test file runs: string literals naming `benchmarks/<name>.py`, or the first argument
    of a `run_benchmark(...)` or `invoke_benchmark(...)` call."""
    found = set()
    for node in ast.walk(ast.parse(test_file.read_text(encoding="utf-8"))):
        runner = isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("run_benchmark", "invoke_benchmark")
        if runner and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.add(first.value)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if match := re.fullmatch(r"benchmarks/(\w+\.py)", node.value):
                found.add(match.group(1))
    return found


def test_every_benchmark_has_a_tiny_size_test() -> None:
    """A new script in benchmarks/ needs a test that runs it small (here, or beside the code it measures)."""
    scripts = {p.name for p in BENCHMARKS.glob("*.py")}
    covered = set().union(*(_scripts_run_by(f) for f in (ROOT / "tests").rglob("test_*.py")))
    assert scripts, "no benchmark scripts found"
    assert not scripts - covered, f"benchmarks without a tiny-size test: {sorted(scripts - covered)}"


def test_lm_learning_refuses_an_unknown_reward_design_before_any_work(tmp_path: Path) -> None:
    args = (
        "--config",
        str(ROOT / "configs" / "experiments" / "small_lm" / "cpu_learn_sft.yaml"),
        "--out",
        str(tmp_path / "run"),
        "--reward-design",
        "nope",
    )
    done = invoke_benchmark("lm_learning.py", *args, cwd=tmp_path)
    assert done.returncode == 2 and "--reward-design" in done.stderr and "nope" in done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("script", "known", "unknown"),
    [("lm_learning.py", "SFT base", "GRPO only"), ("report_learning.py", "SFT + GRPO", "GRPO only")],
)
def test_a_learning_benchmark_refuses_an_unknown_auditor_before_any_work(
    tmp_path: Path, script: str, known: str, unknown: str
) -> None:
    args = ("--out", str(tmp_path / "run"), "--auditor", known, "--auditor", unknown)
    done = invoke_benchmark(script, *args, cwd=tmp_path)
    assert done.returncode == 2 and "--auditor" in done.stderr and unknown in done.stderr
    assert not (tmp_path / "run").exists()


def test_replicates_names_a_run_folder_without_a_record(tmp_path: Path) -> None:
    done = invoke_benchmark("replicates.py", "--run", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2 and "report_learning.json: no report_learning record" in " ".join(done.stderr.split())


def test_report_learning_refuses_more_reset_audits_than_the_training_seeds_hold_before_any_work(tmp_path: Path) -> None:
    args = ("--out", str(tmp_path / "run"), "--reset-rows", "100000")
    done = invoke_benchmark("report_learning.py", *args, cwd=tmp_path)
    assert done.returncode == 2 and "--reset-rows" in done.stderr and "100000 reset rows asked for" in done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_lm_learning(tmp_path: Path, tiny_local_model: Path) -> None:
    raw = load_yaml((ROOT / "configs" / "experiments" / "small_lm" / "cpu_learn_sft.yaml").read_text())
    raw["policy"].update(model=str(tiny_local_model), dtype="float32", lora={**raw["policy"]["lora"], "last_layers": 1})
    raw["policy"].pop("init_adapter")
    raw["episodes"].update(max_new_tokens=8, max_report_tokens=12)
    raw["trainer"]["report_to"] = []
    config = tmp_path / "tiny_sft.yaml"
    config.write_text(yaml.safe_dump(raw))
    run = tmp_path / "run"
    sizes = (
        "--episodes",
        "4",
        "--epochs",
        "1",
        "--finding-repeats",
        "2",
        "--grpo-steps",
        "1",
        "--heldout-seeds",
        "1",
        "--part",
        "behaviors",
    )
    design = (
        "--reward-design",
        "binary",
        "--grpo-learning-rate",
        "2e-4",
    )  # not the config's: the GRPO run must take the options'
    sizes += ("--verdict-weight", "3", "--claim-exploration", "0.5", "--probing", "teacher")
    run_benchmark(
        "lm_learning.py",
        "--config",
        str(config),
        "--out",
        str(run),
        *sizes,
        *design,
        "--auditor",
        "untrained base",
        cwd=tmp_path,
    )
    alone = json.loads((run / "lm_learning.json").read_text())  # one auditor evaluated, no stage it does not need
    assert list(alone["results"]["held-out behaviors"]) == ["untrained base"] and not (run / "sft").exists()
    assert "grpo" not in alone["cpu_seconds"] and not (run / "grpo").exists()
    rows = table_rows(
        run_benchmark("lm_learning.py", "--config", str(config), "--out", str(run), *sizes, *design, cwd=tmp_path)
    )
    for metric in ("valid report rate", "claim rate, planted", "claim rate, benign", "identification (planted)",
                   "FP calibration (benign)", "discrimination (planted - benign)"):  # fmt: skip
        assert len(row(rows, metric, 15)) >= 15, metric  # three auditors and two changes, each with its interval
    record = json.loads((run / "lm_learning.json").read_text())
    assert list(record["results"]["held-out behaviors"]) == ["untrained base", "SFT base", "SFT + GRPO"]
    assert list(record["changes"]["held-out behaviors"]) == ["SFT base - untrained base", "SFT + GRPO - SFT base"]
    probed = record["results"][
        "held-out behaviors, teacher probing"
    ]  # each part audited again with the teacher probing
    assert list(probed) == ["untrained base", "SFT base", "SFT + GRPO"] and probed["SFT base"]["audits"] == 2 * 6
    reports = read_transcripts(run / "eval" / "SFT_base" / "held-out_behaviors_teacher_probing" / TRANSCRIPTS)
    assert all(t.auditor_messages[2].content.startswith("<tool_call>") for t in reports)  # the teacher's first turn
    assert record["cpu_seconds"]["sft"] > 0 and record["cpu_seconds"]["grpo"] > 0
    assert (run / "sft" / "adapter").is_dir() and (run / "grpo" / "adapter").is_dir()
    assert record["grpo_training"] and record["grpo_training"][0]["rollouts"] == 8
    forced = [t for t in read_transcripts(run / "grpo" / TRANSCRIPTS) if CLAIM_FORCED.get(t)]
    assert record["grpo_training"][0]["forced_claims"] == len(forced) == 4  # two of each group of four
    opening = '{"no_behavior_found":false,"predictions":[{"description'  # 8 new tokens: the claim opening's first 8
    assert all(t.auditor_messages[-1].content.replace(" ", "").startswith(opening) for t in forced)
    assert all(PROBED_BY.get(t) == "scripted/teacher" for t in read_transcripts(run / "grpo" / TRANSCRIPTS))
    grpo = load_yaml((run / "grpo_config.yaml").read_text())
    assert record["probing"] == grpo["experiment"]["probing"] == "teacher"
    assert record["reward_design"] == grpo["reward"]["design"] == "binary"
    assert record["grpo_learning_rate"] == grpo["trainer"]["learning_rate"] == 2e-4
    assert record["claim_exploration"] == grpo["experiment"]["claim_exploration"] == 0.5
    sft = json.loads((run / "sft" / "sft.json").read_text())
    assert record["sft"]["examples"] == sft["examples"] >= sft["kept"] and sft["settings"]["finding_repeats"] == 2
    assert (
        sft["settings"]["verdict_weight"] == 3 and sft["weighting"]["verdicts"] == sft["examples"]
    )  # every report has one
    rows = table_rows(run_benchmark("claim_probability.py", "--run", str(run), "--claims", cwd=tmp_path))
    labels = [f"{a}{on}" for a in ("SFT_base", "SFT_plus_GRPO") for on in ("", ", on the SFT data")]
    for label in labels:
        assert 0.0 <= row(rows, label, 3)[0] <= 100.0  # a probability per group, in percent
    probabilities = json.loads((run / "claim_probability.json").read_text())
    assert list(probabilities["auditors"]) == labels
    teacher = sum(g["audits"] for g in probabilities["auditors"]["SFT_base, on the SFT data"]["groups"].values())
    assert teacher == sft["kept"]  # every teacher audit the adapter was trained on is read
    for label in labels:  # made to claim on every planted audit whose target showed the behavior
        by = probabilities["auditors"][label]
        assert by["claims"]["audits"] == by["groups"].get("planted, behavior shown", {}).get("audits", 0)
        assert all(0.0 <= e["mean"] <= 100.0 for k, e in by["claims"].items() if k != "audits")
    assert sum(probabilities["auditors"][label]["claims"]["audits"] for label in labels) > 0  # the claim writing ran
    run_benchmark("claim_probability.py", "--run", str(run), "--auditor", "untrained_base", "--claims",
                  "--quote-opening", "It wrote:", "--copy-quote", cwd=tmp_path)  # fmt: skip
    copied = json.loads((run / "claim_probability.json").read_text())
    assert list(copied["auditors"]) == ["untrained_base", "untrained_base, on the SFT data"]  # no adapter needed
    assert copied["claim_sampling"]["copy_quote"] and copied["claim_sampling"]["quote_opened"]
    assert (
        copied["auditors"]["untrained_base, on the SFT data"]["claims"]["audits"]
        == (probabilities["auditors"]["SFT_base, on the SFT data"]["claims"]["audits"])
    )  # the same audits, made to claim with the quote copied
    held_out = run / "sft" / "teacher" / TRANSCRIPTS  # any teacher audits serve as held-out ones here
    run_benchmark("claim_probability.py", "--run", str(run), "--auditor", "untrained_base", "--claims",
                  "--report-grammar", "--held-out", str(held_out), cwd=tmp_path)  # fmt: skip
    grammar = json.loads((run / "claim_probability.json").read_text())
    assert list(grammar["auditors"]) == ["untrained_base, held-out teacher audits", "untrained_base, on the SFT data"]
    assert (
        grammar["report_grammar"]
        and grammar["claim_sampling"]["copy_quote"]
        and grammar["claim_sampling"]["quote_opened"]
    )
    by = grammar["auditors"]["untrained_base, held-out teacher audits"]
    assert sum(g["audits"] for g in by["groups"].values()) == teacher  # every audit of the file is read
    assert (
        by["groups"] == grammar["auditors"]["untrained_base, on the SFT data"]["groups"]
    )  # the same audits, read alike
    with pytest.raises(AssertionError, match="no such transcripts file"):
        run_benchmark("claim_probability.py", "--run", str(run), "--held-out", str(run / "missing.jsonl"), cwd=tmp_path)
    with pytest.raises(AssertionError, match="unknown auditor base"):
        run_benchmark("claim_probability.py", "--run", str(run), "--auditor", "base", cwd=tmp_path)
    run_benchmark("verdict_probe.py", "--run", str(run), "--layer", "0", "--layer", "1", cwd=tmp_path)
    probe = json.loads((run / "verdict_probe.json").read_text())
    assert probe["audits"]["teacher"] == sft["kept"] and list(probe["layers"]) == ["0", "1"]
    assert all(v is None or 0.0 <= v <= 1.0 for row in probe["layers"].values() for v in row.values())


@pytest.mark.slow
def test_report_learning(tmp_path: Path, tiny_local_model: Path) -> None:
    raw = load_yaml((ROOT / "configs" / "experiments" / "small_lm" / "cpu_learn_evidence.yaml").read_text())
    raw["policy"].update(model=str(tiny_local_model), dtype="float32", lora={**raw["policy"]["lora"], "last_layers": 1})
    raw["trainer"]["report_to"] = []
    raw["data"]["behaviors"] = [
        "flattery",
        "emotional_bond",
        "urgency_manufacturing",
        "self_promotion",
    ]  # a screen of 72 audits
    config = tmp_path / "tiny_evidence.yaml"
    config.write_text(yaml.safe_dump(raw))
    run = tmp_path / "run"
    args = (
        "--config",
        str(config),
        "--out",
        str(run),
        "--steps",
        "1",
        "--samples",
        "2",
        "--seeds",
        "1",
        "--family",
        "steady",
    )
    sampled = ("--evaluation", "sampled", "--auditor", "untrained base", "--auditor", "GRPO")
    rows = table_rows(run_benchmark("report_learning.py", *args, *sampled, "--made-to-claim", cwd=tmp_path))
    assert len(row(rows, "identification (planted), made to claim", 9)) >= 9  # two auditors and the change
    forced = read_transcripts(run / "eval" / "GRPO" / "made_to_claim" / "held-out_behaviors.jsonl")
    assert len(forced) == 6 * 2 and all(
        not t.benign and t.report.predictions for t in forced
    )  # planted only, all claims
    assert row(rows, "planted: correct - nothing", 3)[0] > 0 and row(rows, "benign: nothing - claim", 3)[0] > 0
    for metric in ("claim rate, planted", "claim rate, benign", "discrimination (planted - benign)",
                   "identification (planted)", "FP calibration (benign)", "readable report rate", "P(claim), benign",
                   "P(claim), shown - benign"):  # fmt: skip
        assert len(row(rows, metric, 9)) >= 9, metric  # two auditors and the change, each with its interval
    record = json.loads((run / "report_learning.json").read_text())
    assert list(record["results"]) == ["untrained base", "GRPO"] and (run / "grpo" / "adapter").is_dir()
    units = record["results"]["GRPO"]["held-out behaviors"]
    assert len(record["results"]["GRPO"]["held-out seeds of training behaviors"]) == 4 * 2
    assert len(units) == 6 * 2 and {u["readable report rate"] for u in units.values()} == {100.0}  # every report reads
    assert record["grpo_training"][0]["rollouts"] == 8 and record["cpu_seconds"]["grpo"] > 0
    assert all(
        record["grpo_training"][0][f"spread_groups_{g}"] in (0.0, 100.0) for g in ("planted", "benign")
    )  # one group each
    audits = read_transcripts(run / "eval" / "GRPO" / "held-out_behaviors.jsonl")
    assert len(audits) == 6 * 2 * 2 and all(PROBED_BY.get(t) == "scripted/teacher" for t in audits)
    run_benchmark(
        "report_learning.py", *args[:4], *args[6:], "--steps", "0", *sampled[:2], "--auditor", "GRPO", cwd=tmp_path
    )  # resumed
    assert len(read_transcripts(run / "eval" / "GRPO" / "held-out_behaviors.jsonl")) == len(
        audits
    )  # nothing audited again
    raw["policy"]["init_adapter"] = "nowhere/adapter"  # replaced by the run's own SFT adapter
    raw["experiment"].pop("claim_exploration")
    sft_config = tmp_path / "tiny_evidence_sft.yaml"
    sft_config.write_text(yaml.safe_dump(raw))
    sizes = (
        "--sft-config",
        str(sft_config),
        "--sft-episodes",
        "8",
        "--sft-epochs",
        "1",
        "--reset-rows",
        "4",
        "--seed",
        "3",
    )
    out = run_benchmark(
        "report_learning.py", *args, *sizes, cwd=tmp_path
    )  # the default: SFT, SFT + GRPO, exact evaluation
    rows = table_rows(out.split(MATCHED, 1)[0])  # the first part's tables, before its matched one
    for metric in ("claim rate, planted", "discrimination (planted - benign)", "identification (planted)",
                   "FP calibration (benign)", "evidence quoted (planted)",
                   "identification if made to claim (planted)"):  # fmt: skip
        assert len(row(rows, metric, 15)) >= 15, metric  # three auditors and two changes, each with its interval
    record = json.loads((run / "report_learning.json").read_text())
    assert (
        list(record["exact"]) == ["untrained base", "SFT base", "SFT + GRPO"]
        and record["sft"]["sentences"]["evidence"] > 0
    )
    assert set(record["summaries"]["held-out behaviors"]["exact"]["changes"]) == {
        "SFT base - untrained base",
        "SFT + GRPO - SFT base",
    }
    # the SFT base at the trained auditor's threshold: its own stored scores, shifted to the same benign claim rate
    assert (run / "exact_scores" / "SFT_base" / "held-out_behaviors.json").is_file()
    benign_rate = lambda units: mean(u["claim rate, benign"] for u in units.values() if "claim rate, benign" in u)  # noqa: E731
    matched = record["matched"]["SFT + GRPO"]["held-out behaviors"]
    assert benign_rate(matched["units"]) == pytest.approx(
        benign_rate(record["exact"]["SFT + GRPO"]["held-out behaviors"]), abs=1e-6
    )
    fp = row(
        table_rows(out.rsplit(MATCHED, 1)[1].split(RESET, 1)[0]), "FP calibration (benign)", 9
    )  # the last part's matched table
    assert fp[0] == pytest.approx(fp[3], abs=0.051) and fp[6] == pytest.approx(
        0.0, abs=0.051
    )  # the same FP calibration
    assert record["summaries"]["held-out behaviors"]["matched"]["SFT + GRPO"]["change"]["FP calibration (benign)"][
        "mean"
    ] == pytest.approx(0.0, abs=1e-4)
    # the trained auditor's threshold reset on benign audits of training seeds: there it claims as often as its start
    reset = record["reset"]["SFT + GRPO"]
    assert (
        reset["audits"] == 4
        and (run / "exact_scores" / "SFT_+_GRPO" / "reset_benign_audits_of_training_seeds.json").is_file()
    )
    reset_scores = {
        n: json.loads((run / "exact_scores" / n / "reset_benign_audits_of_training_seeds.json").read_text())
        for n in ("SFT_base", "SFT_+_GRPO")
    }
    stages = [
        run / "sft" / "teacher" / TRANSCRIPTS,
        run / "grpo" / TRANSCRIPTS,
        run / "sft_grpo" / TRANSCRIPTS,
        run / "sft_choice_gradient" / "audits" / TRANSCRIPTS,
    ]
    trained_on = benign_audits_seen(stages)  # the benign audits SFT, GRPO and SFT + GRPO trained on
    assert trained_on and record["reset audits"] == {"audits": 4, "benign rows trained on": len(trained_on)}
    assert (
        reset_scores["SFT_base"].keys() == reset_scores["SFT_+_GRPO"].keys()
        and not {tuple(k.split("|")[:2]) for k in reset_scores["SFT_base"]} & trained_on
    )
    rate = lambda scores, shift=0.0: mean(shift_claims(ChoiceScores(**s), shift).claim_rate for s in scores.values())  # noqa: E731
    assert 100 * rate(reset_scores["SFT_base"]) == pytest.approx(reset["start claim rate"]) and 100 * rate(
        reset_scores["SFT_+_GRPO"]
    ) == pytest.approx(reset["trained claim rate"])
    assert rate(reset_scores["SFT_+_GRPO"], reset["shift"]) == pytest.approx(rate(reset_scores["SFT_base"]), abs=1e-6)
    shifted = lambda units: mean(u["claim rate, benign"] for u in units.values() if "claim rate, benign" in u)  # noqa: E731
    moved = shifted(reset["held-out behaviors"]) - shifted(record["exact"]["SFT + GRPO"]["held-out behaviors"])
    assert moved == 0.0 or (moved > 0) == (reset["shift"] > 0)  # the held-out audits' scores moved by that shift
    fp = row(
        table_rows(out.rsplit(RESET, 1)[1].split(START_VERDICT, 1)[0]), "FP calibration (benign)", 9
    )  # the last part's reset table: measured, not matched
    change = record["summaries"]["held-out seeds of training behaviors"]["reset"]["SFT + GRPO"]["change"][
        "FP calibration (benign)"
    ]["mean"]
    assert fp[6] == pytest.approx(change, abs=0.051)
    # the trained auditor's choice of evidence under its start's verdict: its own quotes, the start's
    # P(claim) after each
    for part in ("held-out behaviors", "held-out seeds of training behaviors"):
        composed, trained, start = (
            units[part]
            for units in (
                record["start verdict"]["SFT + GRPO"],
                record["exact"]["SFT + GRPO"],
                record["exact"]["SFT base"],
            )
        )
        assert composed.keys() == start.keys()
        for key, unit in composed.items():
            assert unit.get("identification if made to claim (planted)") == trained[key].get(
                "identification if made to claim (planted)"
            )
            assert [v for k, v in unit.items() if k.startswith("verdict on")] == [
                v for k, v in start[key].items() if k.startswith("verdict on")
            ]
    # that auditor reset too: the start's verdict shifted until, behind the trained quotes, it claims on the reset
    # audits as the start does
    verdict_reset = record["start verdict reset"]["SFT + GRPO"]
    behind = [ChoiceScores(quote=q["quote"], claim=shift_claims(ChoiceScores(**b), verdict_reset["shift"]).claim)
              for q, b in zip(reset_scores["SFT_+_GRPO"].values(), reset_scores["SFT_base"].values(),
                              strict=True)]  # fmt: skip
    assert mean(c.claim_rate for c in behind) == pytest.approx(rate(reset_scores["SFT_base"]), abs=1e-6)
    for key, unit in verdict_reset["held-out behaviors"].items():  # the quotes are the trained auditor's, untouched
        assert unit.get("identification if made to claim (planted)") == record["exact"]["SFT + GRPO"][
            "held-out behaviors"
        ][key].get("identification if made to claim (planted)")
    fp = row(table_rows(out.rsplit(START_VERDICT, 1)[1].split(CEILING, 1)[0]), "FP calibration (benign)", 9)
    change = record["summaries"]["held-out seeds of training behaviors"]["start verdict"]["SFT + GRPO"]["change"][
        "FP calibration (benign)"
    ]["mean"]
    assert fp[6] == pytest.approx(change, abs=0.051)
    # the best choice of evidence under the SFT base's verdict: never a benign claim rate above the SFT base's own
    ceiling, start = (
        record["evidence ceiling"]["SFT base"]["held-out behaviors"],
        record["exact"]["SFT base"]["held-out behaviors"],
    )
    assert ceiling.keys() == start.keys() and any("claim rate, benign" in u for u in ceiling.values())
    assert all(
        u["claim rate, benign"] <= start[k]["claim rate, benign"] + 1e-9
        for k, u in ceiling.items()
        if "claim rate, benign" in u
    )
    assert all(
        u["evidence quoted (planted)"] in (0.0, 100.0) for u in ceiling.values() if "evidence quoted (planted)" in u
    )
    assert CEILING in out and "untrained base" in record["evidence ceiling"]  # every start's ceiling
    sft_grpo = json.loads((run / "sft_grpo_config.yaml").read_text())
    assert (
        sft_grpo["policy"]["init_adapter"] == str((run / "sft" / "adapter").resolve())
        and sft_grpo["seed"] == 3
        and record["grpo_seed"] == 3
    )
    exact = record["exact"]["SFT base"]["held-out behaviors"]
    assert len(exact) == 6 * 2 and all(
        0.0 <= u.get("claim rate, planted", u.get("claim rate, benign")) <= 100.0 for u in exact.values()
    )
    sums = record["summaries"]["held-out behaviors"]["exact"]["results"]["SFT base"]
    ranking = sums["ranking AUC (shown vs benign)"]["mean"]
    assert 0.0 <= ranking <= 100.0 if sums["audits"]["planted, behavior shown"] else math.isnan(ranking)
    verdicts = [v for u in exact.values() for k, v in u.items() if k.startswith("verdict on clean sentences")]
    assert verdicts and all(
        0.0 <= v <= 100.0 for v in verdicts
    )  # the verdict read after every clean sentence, quoted or not
    # the SFT base's quote trained by the exact gradient of its expected reward, for the SFT base's verdict
    raw["reward"] |= {"benign_scale": 0.5}
    raw["experiment"] |= {"quote_credit": "expected", "expected_verdict": "start"}
    raw["trainer"]["scale_rewards"] = "batch"
    sft_config.write_text(yaml.safe_dump(raw))
    gradient = (
        "--sft-config",
        str(sft_config),
        "--reset-rows",
        "4",
        "--gradient-episodes",
        "6",
        "--gradient-epochs",
        "1",
    )
    out = run_benchmark(
        "report_learning.py",
        *args,
        *gradient,
        "--auditor",
        "SFT base",
        "--auditor",
        "SFT + choice gradient",
        cwd=tmp_path,
    )
    record = json.loads((run / "report_learning.json").read_text())
    trained = record["choice_gradient"]["trained audits"]
    words = " ".join(out.split())  # the console wraps long lines
    assert (
        trained["planted"] + trained["benign"] > 0
        and "SFT + choice gradient: " in words
        and "expected reward by third of the steps" in words
    )
    assert record["summaries"]["held-out behaviors"]["exact"]["changes"]["SFT + choice gradient - SFT base"]
    # its threshold reset on benign audits none of the four training stages audited, the SFT base scored on them again
    now_trained_on = benign_audits_seen(stages)
    assert benign_audits_seen(stages[3:]) and now_trained_on == trained_on | benign_audits_seen(stages[3:])
    assert record["reset audits"]["benign rows trained on"] == len(now_trained_on)
    rescored = json.loads(
        (run / "exact_scores" / "SFT_base" / "reset_benign_audits_of_training_seeds.json").read_text()
    )
    assert len(rescored) == 4 and not {tuple(k.split("|")[:2]) for k in rescored} & now_trained_on
    assert (
        record["reset"]["SFT + choice gradient"]["audits"] == 4 and "SFT + GRPO" not in record["reset"]
    )  # one set on other audits is dropped
    composed = record["start verdict"]["SFT + choice gradient"][
        "held-out behaviors"
    ]  # the auditor it trains: its quotes, the SFT base's verdict
    for key, unit in composed.items():
        assert [v for k, v in unit.items() if k.startswith("verdict on")] == [
            v for k, v in exact[key].items() if k.startswith("verdict on")
        ]
    # where the trained quote moved, by the length of the sentence quoted, read from the stored scores
    lengths = run_benchmark("quote_lengths.py", "--out", str(run), "--config", str(config), cwd=tmp_path)
    moved = json.loads((run / "quote_lengths.json").read_text())["held-out behaviors"]
    for target in ("planted", "benign"):
        words = moved[target]["words quoted"]
        assert (
            0 < words["SFT base"]["n"] <= 6 and words["SFT base"]["mean"] > 0
        )  # the tiny part's audits with a choice, probed again
        assert words["change"]["mean"] == pytest.approx(
            words["SFT + choice gradient"]["mean"] - words["SFT base"]["mean"], abs=1e-6
        )
    assert (
        moved["benign"]["P(quote evidence)"]["SFT + choice gradient"]["mean"] == 0.0
    )  # a benign target shows no evidence
    assert "where SFT + choice gradient's quote moved from SFT base's" in " ".join(lengths.split())
    # the same run read as two replicates: each run's change is the record's, and two equal runs have no spread
    spread = tmp_path / "replicates.json"
    replicas = run_benchmark("replicates.py", "--run", str(run), "--run", str(run), "--save", str(spread), cwd=tmp_path)
    pooled = json.loads(spread.read_text())["held-out behaviors"]["discrimination (planted - benign)"]
    reset_change = record["summaries"]["held-out behaviors"]["reset"]["SFT + choice gradient"]["change"][
        "discrimination (planted - benign)"
    ]
    assert pooled["runs"] == [reset_change, reset_change]
    assert pooled["over runs"]["lo"] == pytest.approx(reset_change["mean"]) == pytest.approx(pooled["over runs"]["hi"])
    assert "expected reward on planted training audits, per run" in " ".join(replicas.split())


def test_summary_puts_each_figure_beside_its_goal_and_the_cpu(tmp_path: Path) -> None:
    out = run_benchmark(
        "summary.py", "--tiny", "--only", "engine_overhead", "--json", str(tmp_path / "s.json"), cwd=tmp_path
    )
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["cpu_capability"] in out and summary["tiny"] is True
    (figure,) = summary["figures"]
    assert figure["benchmark"] == "engine_overhead" and figure["goal"] == "< 2"
    assert float(figure["value"]) > 0 and figure["met"] == (float(figure["value"]) < 2)
    assert "Petri" in figure["anchor"]
    assert "engine ms per auditor turn (mean)" in table_rows(out)["engine_overhead"]
