"""The package's import contract, read from the source (every import, in functions and under TYPE_CHECKING too):
no module of the product imports an experiment, the layers of the data flow only point down, and no modules import
each other in a circle."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import networkx as nx

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "auditrl"
EXPERIMENTS = "auditrl.experiments"
LAYERS: list[tuple[str, ...]] = [
    ("behaviors",),
    ("targets",),
    ("scaffold",),
    ("judges",),
    ("rewards",),
    ("train",),
    ("evaluate", "analysis", "pages"),
    ("experiments", "cli"),
]
"""The data flow, bottom first: a module of one layer may import its own layer's packages and those below, never a
higher one (behaviors -> targets -> scaffold -> judges -> rewards -> train; evaluate, analysis and pages read
transcripts; the CLI and the experiments on top). Packages outside the flow (auditworld, models, the utilities)
are held by the other two rules."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, modules: set[str]) -> Iterator[tuple[str, int]]:
    """Each package module `path` imports (the most specific existing module an import names), with its line."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name.startswith(PACKAGE + "."):
                yield name, node.lineno


def import_graph() -> nx.DiGraph:
    paths = {module_name(p): p for p in (SRC / PACKAGE).rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(paths)
    for name, path in paths.items():
        for target, line in imported(path, set(paths)):
            if target != name and not name.startswith(target + "."):  # a package's own __init__ is not an edge
                graph.add_edge(name, target, line=line)
    return graph


def layer(module: str) -> int | None:
    top = module.split(".")[1] if module.count(".") else ""
    return next((i for i, packages in enumerate(LAYERS) if top in packages), None)


def test_no_product_module_imports_an_experiment() -> None:
    graph = import_graph()
    found = [f"{a}:{d['line']} imports {b}" for a, b, d in graph.edges(data=True)
             if b.startswith(EXPERIMENTS) and not a.startswith(EXPERIMENTS)]  # fmt: skip
    assert not found, found


def test_the_layers_of_the_data_flow_only_point_down() -> None:
    graph = import_graph()
    upward = []
    for a, b, data in graph.edges(data=True):
        low, high = layer(a), layer(b)
        if low is not None and high is not None and high > low:
            upward.append(f"{a}:{data['line']} imports {b}")
    assert not upward, upward


def test_no_modules_import_each_other_in_a_circle() -> None:
    circles = [sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1]
    assert not circles, circles


def test_the_contract_sees_the_imports_it_rules_on() -> None:
    """The reader finds function-level and TYPE_CHECKING imports, so a rule cannot pass by missing them."""
    graph = import_graph()
    assert graph.has_edge("auditrl.cli.train", "auditrl.train.grpo")  # imported inside a function
    assert graph.has_edge("auditrl.rewards.registry", "auditrl.judges.client")  # only under TYPE_CHECKING there
    assert graph.has_edge("auditrl.experiments.small_lm.extension", "auditrl.train.extensions")
    assert layer("auditrl.train.grpo") == 5 and layer("auditrl.models.local") is None


def test_the_core_trainer_stays_readable_and_names_no_experiment() -> None:
    """A GPU user reads `auditrl.train` top to bottom: under 4,000 lines, and no experiment's package named in it."""
    files = sorted((SRC / PACKAGE / "train").rglob("*.py"))
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in files)
    assert lines < 4000, f"src/auditrl/train holds {lines} lines"
    naming = [p.name for p in files if EXPERIMENTS in p.read_text(encoding="utf-8")]
    assert not naming, naming
