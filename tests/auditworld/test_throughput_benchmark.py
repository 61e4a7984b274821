"""benchmarks/sim_throughput.py runs (at a tiny size), so its README figure stays reproducible."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from auditrl.auditworld.designs import vectorised_names

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "sim_throughput.py"


def test_the_throughput_benchmark_runs_every_design_from_the_base() -> None:
    spec = importlib.util.spec_from_file_location("sim_throughput", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    table = module.main("--steps 1 --groups 4 --group-size 2 --max-turns 4 --base-audits 8 --lockstep 2".split())
    labels = list(table.columns[0].cells)
    assert labels[:2] == ["rollout only, imitation base", "rollout only, random base"]
    assert labels[2:] == [row for d in vectorised_names() for row in (f"train: {d}", f"lockstep x2: {d}")]
    assert all(float(c.replace(",", "")) > 0 for c in table.columns[4].cells)
