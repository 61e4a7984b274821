"""Judge families by name, resolved in one place: `programmatic`, `sim`, or an inspect-ai model spec.

A family supplies one judge of each kind the reward designs ask for: a pointwise concerningness judge, a
binary-match judge (lenient or strict) and a pairwise judge (planted, or the calibration variant for
benign targets). Families register with `@judge_family`, as inspect-ai's model providers register with
`@modelapi`; a spec `<provider>/<model>` gets the LLM judges of this package on a `JudgeClient`.

The built-in families live with their judges (`auditrl.judges.programmatic`, `auditrl.auditworld.transcript_judges`) and
are imported by name on first lookup, so this module depends on neither; a family defined elsewhere is
available once its module is imported, which the registry does itself for modules other packages declare
under the `auditrl.plugins` entry-point group (`auditrl.plugins`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from auditrl.plugins import load_plugins

if TYPE_CHECKING:
    from auditrl.judges.binary import BinaryScorer
    from auditrl.judges.client import JudgeClient
    from auditrl.judges.concerningness import ConcerningnessScorer
    from auditrl.judges.pairwise import PairwiseJudgeLike

BUILTIN_FAMILY_MODULES: tuple[str, ...] = ("auditrl.judges.programmatic", "auditrl.auditworld.transcript_judges")
"""Modules whose import registers the built-in families (looked up lazily, like inspect-ai's providers)."""
BUILTIN_FAMILIES: dict[str, str] = {
    "programmatic": "generic judges reading the ground-truth annotations of any simulated or scripted target",
    "sim": "AuditWorld's judges with their modelled weaknesses, the ones AuditWorld trains against; "
    "for AuditWorld and sim/<family> transcripts",
}
"""The built-in families' descriptions, kept here so that help text is written without importing their judges."""
DEFAULT_FAMILY = "programmatic"


class JudgeFamily(Protocol):
    """The judges of one family, one per kind (each kind has one verb: `score` per transcript, `compare` per pair)."""

    def concerningness(self) -> ConcerningnessScorer: ...

    def binary(self, strict: bool) -> BinaryScorer: ...

    def pairwise(self, calibration: bool) -> PairwiseJudgeLike: ...


FamilyFactory = Callable[[], JudgeFamily]
F = TypeVar("F", bound=FamilyFactory)


@dataclass(frozen=True)
class FamilyEntry:
    name: str
    description: str
    factory: FamilyFactory


_FAMILIES: dict[str, FamilyEntry] = {}


def judge_family(name: str, *, description: str | None = None) -> Callable[[F], F]:
    """Register a judge family under `name` (a spec without `/`, so it never shadows a model spec).

    A built-in family's description is its entry in `BUILTIN_FAMILIES`; any other family gives one.
    """
    if "/" in name or not name:
        raise ValueError(f"judge family name {name!r} must be non-empty and contain no '/' (that marks a model spec)")
    described = description if description is not None else BUILTIN_FAMILIES.get(name)
    if described is None:
        raise ValueError(f"judge family {name!r} needs a description")

    def register(factory: F) -> F:
        _FAMILIES[name] = FamilyEntry(name=name, description=described, factory=factory)
        return factory

    return register


def _families() -> dict[str, FamilyEntry]:
    for module in BUILTIN_FAMILY_MODULES:
        importlib.import_module(module)
    load_plugins()
    return _FAMILIES


def judge_family_names() -> tuple[str, ...]:
    """Every registered family name, sorted (registration order depends on what was imported first)."""
    return tuple(sorted(_families()))


def judge_spec_help() -> str:
    """One sentence per family, for CLI help and config descriptions (the built-in families' judges are not
    imported)."""
    load_plugins()
    described = {**BUILTIN_FAMILIES, **{n: e.description for n, e in _FAMILIES.items()}}
    families = "; ".join(f"'{n}' ({described[n]})" for n in sorted(described))
    return (
        "A judge model spec (an inspect-ai model string, e.g. anthropic/claude-sonnet-4-0) or a judge family: "
        f"{families}."
    )


@dataclass(frozen=True)
class ModelJudges:
    """The LLM judges of this package on one judge model."""

    client: JudgeClient
    extra_dimensions: Sequence[Path] = ()

    def concerningness(self) -> ConcerningnessScorer:
        from auditrl.judges.concerningness import ConcerningnessJudge

        return ConcerningnessJudge(self.client, extra_dimensions=self.extra_dimensions)

    def binary(self, strict: bool) -> BinaryScorer:
        from auditrl.judges.binary import BinaryMatchJudge

        return BinaryMatchJudge(self.client, strict=strict)

    def pairwise(self, calibration: bool) -> PairwiseJudgeLike:
        from auditrl.judges.pairwise import CalibrationPairwiseJudge, PairwiseJudge

        return (CalibrationPairwiseJudge if calibration else PairwiseJudge)(self.client)


def connect(spec: str) -> JudgeClient:
    """The default way from a model spec to a judge client (no cache, default retries)."""
    from auditrl.judges.client import JudgeClient
    from auditrl.models.roles import resolve_model

    return JudgeClient(resolve_model(spec))


def resolve_judges(
    spec: str | JudgeClient | JudgeFamily | None,
    *,
    extra_dimensions: Sequence[Path] = (),
    client: Callable[[str], JudgeClient] = connect,
) -> JudgeFamily:
    """The judge family of a spec: a registered name (None = programmatic), a model spec, a client, or a family.

    `client` turns a model spec into a judge client (the CLI passes one with its cache and retries);
    `extra_dimensions` (Petri dimension files) extend the LLM concerningness judge's rubric.
    """
    from auditrl.judges.client import JudgeClient

    if spec is None:
        spec = DEFAULT_FAMILY
    if isinstance(spec, JudgeClient):
        return ModelJudges(spec, extra_dimensions)
    if not isinstance(spec, str):
        return spec
    entry = _families().get(spec)
    if entry is not None:
        return entry.factory()
    return ModelJudges(client(spec), extra_dimensions)
