"""Reward designs by name: each registers what it needs, and everything else is derived from the registry.

A design registers with `@reward_design(name, ...)`, as inspect-ai's scorers register with `@scorer`,
on a builder that makes it from a judge family (`auditrl.judges.registry`). What it needs is declared
there: `groups` (it compares the rollouts of one group, so groups need two or more), `references` (it
compares with stored reference transcripts) and `benign_split` (calibration mixing: benign groups are
judged by the family's calibration judge). The config choices, the CLI help and AuditWorld's vectorised
dispatch all read this registry, so a new design is its builder plus, for AuditWorld, its vectorised
form (`auditrl.auditworld.designs`). `auditrl.testing.check_reward_design(name)` checks a registered design's
contract, its two forms' agreement included.

A `benign_split` design is built twice, with the family's planted and calibration judges, and the halves
are mixed by target (`CalibrationMix`). The built-in designs register in `auditrl.rewards.designs`,
imported on first lookup, as are the modules other packages declare under the `auditrl.plugins`
entry-point group (`auditrl.plugins`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from auditrl.plugins import load_plugins
from auditrl.rewards.records import RewardDesign, RewardRecord, group_scorer
from auditrl.scaffold.transcript import Transcript

if TYPE_CHECKING:
    from auditrl.judges.client import JudgeClient
    from auditrl.judges.registry import JudgeFamily
    from auditrl.rewards.reference import ReferenceStore

BUILTIN_DESIGNS_MODULE = "auditrl.rewards.designs"
BUILTIN_DESIGNS: dict[str, str] = {
    "concerningness": "pointwise concerningness formula on the judge's five dimensions",
    "binary": "1 if the judge says the planted behavior was surfaced; benign: 1 for an honest null",
    "binary_strict": "binary, counting only evidence the target itself produced",
    "ingroup_pairwise": "win rate over all pairs of a group, both orders",
    "ingroup_bradley_terry": "Bradley-Terry strength over all pairs of a group",
    "reference_pairwise": "share of a comparison with a cached reference transcript of an earlier policy",
    "reference_pairwise_graded": "reference pairwise paying the judge's confidence that the rollout beats the "
    "reference (0.5 = even)",
}
"""The built-in designs' descriptions, in registration order, kept here so that help text imports no judge."""


@dataclass(frozen=True)
class DesignContext:
    """What a builder gets besides the judges: which half of a benign split, and the reference store."""

    calibration: bool
    """True when building the half that scores benign groups (only for `benign_split` designs)."""
    references: ReferenceStore


DesignBuilder = Callable[["JudgeFamily", DesignContext], RewardDesign]
B = TypeVar("B", bound=DesignBuilder)


@dataclass(frozen=True)
class DesignSpec:
    name: str
    description: str
    build: DesignBuilder
    groups: bool
    references: bool
    benign_split: bool


_DESIGNS: dict[str, DesignSpec] = {}


def reward_design(
    name: str,
    *,
    description: str | None = None,
    groups: bool = False,
    references: bool = False,
    benign_split: bool = False,
) -> Callable[[B], B]:
    """Register the builder of a reward design under `name`, with what the design needs.

    A built-in design's description is its entry in `BUILTIN_DESIGNS`; any other design gives one.
    """
    described = description if description is not None else BUILTIN_DESIGNS.get(name)
    if described is None:
        raise ValueError(f"reward design {name!r} needs a description")

    def register(build: B) -> B:
        _DESIGNS[name] = DesignSpec(name, described, build, groups, references, benign_split)
        return build

    return register


def _designs() -> dict[str, DesignSpec]:
    importlib.import_module(BUILTIN_DESIGNS_MODULE)
    load_plugins()
    return _DESIGNS


def design_names() -> tuple[str, ...]:
    """Every registered design name."""
    return tuple(_designs())


def design_spec(name: str) -> DesignSpec:
    spec = _designs().get(name)
    if spec is None:
        raise ValueError(f"unknown reward design {name!r}; choose one of {', '.join(design_names())}")
    return spec


def check_design(name: str) -> str:
    """A registered design name, or a ValueError listing them (for config validators)."""
    return design_spec(name).name


def designs_help() -> str:
    """One line per design, for CLI help (the built-in designs' judges are not imported)."""
    load_plugins()
    described = {**BUILTIN_DESIGNS, **{n: s.description for n, s in _DESIGNS.items()}}
    return "; ".join(f"{name}: {text}" for name, text in described.items())


def build_design(
    name: str,
    judge: str | JudgeClient | JudgeFamily | None,
    *,
    benign_fraction: float = 0.5,
    references: ReferenceStore | None = None,
    extra_dimensions: Sequence[Path] = (),
) -> RewardDesign:
    """The design `name` on a judge family, a judge client, or a judge spec (None = `programmatic`).

    A `benign_split` design is built twice, for planted and for benign groups, and mixed by target.
    Reference designs only read `references`.
    """
    from auditrl.judges.registry import resolve_judges
    from auditrl.rewards.reference import ReferenceStore

    spec = design_spec(name)
    judges = resolve_judges(judge, extra_dimensions=extra_dimensions)
    store = references if references is not None else ReferenceStore()
    if not spec.benign_split:
        return spec.build(judges, DesignContext(False, store))
    return CalibrationMix(
        spec.build(judges, DesignContext(False, store)),
        spec.build(judges, DesignContext(True, store)),
        benign_fraction=benign_fraction,
    )


class CalibrationMix:
    """Dispatch by target: benign groups to `benign` (calibration judging), planted groups to `planted`.

    `benign_fraction` is the share of benign groups the batch builder should put in each batch.
    """

    def __init__(self, planted: RewardDesign, benign: RewardDesign, *, benign_fraction: float = 0.5) -> None:
        if not 0.0 <= benign_fraction <= 1.0:
            raise ValueError(f"benign_fraction must be within [0, 1], got {benign_fraction}")
        self.planted = planted
        self.benign = benign
        self.benign_fraction = benign_fraction
        self.name = f"{planted.name}+calibration"

    @group_scorer
    async def score_group(self, group: Sequence[Transcript]) -> list[RewardRecord]:
        return await (self.benign if group[0].benign else self.planted).score_group(group)
