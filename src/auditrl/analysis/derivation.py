"""A strategy codebook derived from the data, as the paper built its own, then frozen.

Base clusters (MiniBatchKMeans at about n/100) are rolled up level by level into strategies,
archetypes and categories. Offline, a roll-up is weighted k-means over the centres of the level below
(weights = transcripts), so each level is a partition of the one below; with a naming model, the model
groups the named children instead (`LLMNamer.roll_up`). Every group at every level is named
contrastively from up to 50 members nearest its centre against the 50 nearest non-members: offline by
the terms that most separate them, with a model by asking it what the members do that the neighbours
do not. A model's abstention falls back to the offline method for that group or level, and the
derived codebook lists each fallback.

The archetype and category levels freeze into an ordinary `Codebook` (exemplars are the summaries
nearest each archetype's centre and its strategies' representatives), so `classify` can reclassify
every transcript against it and a later run can load it with `--codebook`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
from pydantic import BaseModel, Field
from rich.markup import escape
from rich.table import Table
from sklearn.cluster import KMeans

from auditrl.analysis.assignment import shares
from auditrl.analysis.choices import ARCHETYPES, CATEGORIES
from auditrl.analysis.codebook import Archetype, Category, Codebook
from auditrl.analysis.representation import Embedded
from auditrl.analysis.stability import CodebookComparison, Stability, compare_codebooks, stability
from auditrl.analysis.strategies import (
    KEYWORDS,
    StrategyClusters,
    classify,
    contrastive_namer,
    name_phrase,
    weighted_centers,
)

LEVELS = ("strategy", "archetype", "category")
EXEMPLARS = 8
MIN_TRANSCRIPTS_PER_CLUSTER = 25
"""Below this many transcripts per base cluster on average, bootstrap overlaps are resampling noise."""


class Namer(Protocol):
    """What derivation needs from a naming model (`LLMNamer` is one)."""

    label: str

    def name_groups(self, groups: Sequence[tuple[Sequence[str], Sequence[str]]]) -> list[tuple[str, str] | None]: ...

    def roll_up(self, children: Sequence[tuple[str, str]], groups: int) -> list[int] | None: ...


class DerivedGroup(BaseModel):
    """One group at one level of the derived codebook."""

    id: str = Field(description="Level initial and index: b3 (base cluster), s3, a3, c3.")
    name: str
    description: str
    keywords: list[str] = Field(description="The terms that best separate members from the nearest non-members.")
    size: int = Field(description="Transcripts in the group.")
    children: list[str] = Field(
        description="Ids of the groups one level down that it rolls up (none for base clusters)."
    )
    exemplars: list[str] = Field(description="Distinct summaries nearest the group's centre.")


class DerivedCodebook(BaseModel):
    """The hierarchy derived from one corpus: base clusters, strategies, archetypes, categories."""

    embedder: str
    namer: str = Field(description="'offline' (contrastive terms, weighted k-means roll-up) or the naming model.")
    base: list[DerivedGroup]
    strategies: list[DerivedGroup]
    archetypes: list[DerivedGroup]
    categories: list[DerivedGroup]
    fallbacks: list[str] = Field(
        default_factory=list, description="Where a naming model abstained and the offline method was used."
    )

    def parent_of(self, level: str) -> dict[str, str]:
        """Child id -> group id for the groups of `level` (strategy, archetype or category)."""
        groups = {"strategy": self.strategies, "archetype": self.archetypes, "category": self.categories}[level]
        return {c: g.id for g in groups for c in g.children}

    def to_codebook(self) -> Codebook:
        """The archetype and category levels as a frozen codebook in the shipped file's format."""
        category_of = self.parent_of("category")
        categories = [Category(id=f"derived_{c.id}", name=c.name, description=c.description) for c in self.categories]
        archetypes = [
            Archetype(
                id=f"derived_{a.id}",
                number=i + 1,
                category=f"derived_{category_of[a.id]}",
                name=a.name,
                description=a.description,
                keywords=a.keywords or a.name.split(),
                exemplars=a.exemplars,
            )
            for i, a in enumerate(self.archetypes)
        ]
        return Codebook(version=1, categories=categories, archetypes=archetypes)


def _offline_name(ranked: list[str], children: Sequence[DerivedGroup]) -> tuple[str, str]:
    phrase = ", ".join(name_phrase(ranked)) or "undistinguished audits"
    description = (
        "Audits whose strategy summaries stand out from their nearest neighbours by: "
        f"{', '.join(ranked[:KEYWORDS]) or 'nothing in particular'}."
    )
    if children:
        description += (
            f" Rolls up {len(children)} narrower groups: "
            + "; ".join(c.name for c in children[:6])
            + ("; ..." if len(children) > 6 else ".")
        )
    return phrase, description


class _Deriver:
    def __init__(self, emb: Embedded, namer: Namer | None, seed: int) -> None:
        self.emb = emb
        self.namer = namer
        self.seed = seed
        self.contrastive = contrastive_namer(emb)
        self.fallbacks: list[str] = []

    def groups(
        self, labels: np.ndarray, prefix: str, level: str, children: list[list[DerivedGroup]]
    ) -> list[DerivedGroup]:
        """Name the groups 0..k-1 that `labels` (one per distinct text) defines."""
        k = int(labels.max()) + 1
        centers = weighted_centers(self.emb.vectors, labels, self.emb.counts, k)
        contrasts = [self.contrastive.contrast(labels == g, centers[g]) for g in range(k)]
        ranked = [self.contrastive.ranked_terms(m, o) for m, o in contrasts]
        texts = self.emb.distinct
        named: list[tuple[str, str] | None] = [None] * k
        if self.namer is not None:
            named = self.namer.name_groups([([texts[i] for i in m], [texts[i] for i in o]) for m, o in contrasts])
            missing = [g for g in range(k) if named[g] is None]
            if missing:
                self.fallbacks.append(
                    f"{level}: the naming model abstained on {len(missing)} of {k} groups, named offline"
                )
        out = []
        for g, ((members, _), terms) in enumerate(zip(contrasts, ranked, strict=True)):
            name, description = named[g] or _offline_name(terms, children[g])
            exemplars = [texts[i] for i in members[:EXEMPLARS]]
            exemplars += [x for c in children[g] for x in c.exemplars[:1] if x not in exemplars][
                :EXEMPLARS
            ]  # its children's centres
            out.append(
                DerivedGroup(
                    id=f"{prefix}{g}",
                    name=name,
                    description=description,
                    keywords=terms[:KEYWORDS],
                    size=int(self.emb.counts[labels == g].sum()),
                    children=[c.id for c in children[g]],
                    exemplars=exemplars,
                )
            )
        return out

    def roll_up(self, labels: np.ndarray, below: list[DerivedGroup], size: int, level: str) -> np.ndarray:
        """Parent index of each group in `below`: the model's grouping when it gives a partition, else weighted
        k-means."""
        if self.namer is not None:
            assignment = self.namer.roll_up([(g.name, g.description) for g in below], size)
            if assignment is not None:
                return _compact(np.asarray(assignment))
            self.fallbacks.append(f"{level}: the naming model gave no valid roll-up, rolled up offline")
        centers = weighted_centers(self.emb.vectors, labels, self.emb.counts, len(below))
        weights = np.array([g.size for g in below], dtype=np.float64)
        km = KMeans(n_clusters=size, random_state=self.seed, n_init=10).fit(centers, sample_weight=weights)
        return _compact(km.labels_)


def _compact(labels: np.ndarray) -> np.ndarray:
    """Relabel to 0..m-1 in order of first appearance (k-means may leave a label unused)."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))
    return order[inverse.ravel()]


def derive_codebook(
    emb: Embedded,
    base_labels: np.ndarray,
    sizes: dict[str, int | None] | None = None,
    namer: Namer | None = None,
    seed: int = 0,
) -> tuple[DerivedCodebook, dict[str, np.ndarray]]:
    """Name the base clusters (labels per distinct text) and roll them up into strategies, archetypes, categories.

    Returns the codebook and, per level, the group index of each distinct text. A level asked for more
    groups than the level below has keeps one group per child.
    """
    wanted = {"strategy": None, "archetype": ARCHETYPES, "category": CATEGORIES, **(sizes or {})}
    labels = _compact(np.asarray(base_labels))
    deriver = _Deriver(emb, namer, seed)
    k = int(labels.max()) + 1
    levels: dict[str, list[DerivedGroup]] = {"base": deriver.groups(labels, "b", "base", [[] for _ in range(k)])}
    assigned = {"base": labels}
    below = levels["base"]
    for level in LEVELS:
        size = wanted[level] or max(1, round(len(below) / 10))
        size = max(1, min(size, len(below)))
        parent = deriver.roll_up(labels, below, size, level)
        labels = assigned[level] = parent[labels]
        children = [[below[i] for i in np.flatnonzero(parent == g)] for g in range(int(parent.max()) + 1)]
        levels[level] = deriver.groups(labels, level[0], level, children)
        below = levels[level]
    book = DerivedCodebook(
        embedder=emb.embedder,
        namer=namer.label if namer is not None else "offline",
        base=levels["base"],
        strategies=levels["strategy"],
        archetypes=levels["archetype"],
        categories=levels["category"],
        fallbacks=deriver.fallbacks,
    )
    return book, assigned


class CodebookStudy(BaseModel):
    """A derived codebook, every transcript reclassified against it frozen, its stability and its fit to the shipped
    one."""

    derived: DerivedCodebook
    frozen: Codebook
    archetypes: list[str] = Field(description="Frozen-codebook archetype id per transcript (the reclassification).")
    agreement: float = Field(
        description="Share of transcripts whose reclassified archetype is the one the roll-up gave them."
    )
    stability: Stability | None
    too_few: str | None = Field(
        default=None, description="Why no stability figure is given: the corpus is too small for one."
    )
    comparison: CodebookComparison


def study_codebook(
    clusters: StrategyClusters,
    emb: Embedded,
    sizes: dict[str, int | None] | None = None,
    namer: Namer | None = None,
    bootstraps: int = 3,
) -> CodebookStudy:
    """Derive a codebook from `clusters`' base clusters, freeze it, reclassify, measure stability, compare."""
    first = np.unique(emb.inverse, return_index=True)[1]
    base = np.asarray(clusters.labels)[first]  # label of each distinct text
    derived, assigned = derive_codebook(emb, base, sizes, namer, clusters.seed)
    frozen = derived.to_codebook()
    best, _ = classify(emb, frozen)
    ids = [a.id for a in frozen.archetypes]
    rolled = assigned["archetype"]
    agreement = float(emb.counts[best == rolled].sum() / emb.counts.sum())
    archetypes = [ids[i] for i in best[emb.inverse]]
    note = too_few(
        int(emb.counts.sum()), len(derived.base), len(derived.archetypes), (sizes or {}).get("archetype") or ARCHETYPES
    )
    stab = (
        stability(emb, _compact(base), rolled, bootstraps, clusters.seed) if bootstraps > 0 and note is None else None
    )
    comparison = compare_codebooks(
        archetypes, clusters.archetypes,
        [frozen.category_of(a).id for a in archetypes], clusters.categories(),
        {a.id: f"{a.number}. {a.name}" for a in frozen.archetypes}, clusters.label_names("archetype"),
    )  # fmt: skip
    return CodebookStudy(
        derived=derived,
        frozen=frozen,
        archetypes=archetypes,
        agreement=agreement,
        stability=stab,
        too_few=note,
        comparison=comparison,
    )


def too_few(transcripts: int, clusters: int, archetypes: int, asked: int) -> str | None:
    """Why a codebook derived from this many transcripts and base clusters has no stability figure, or None."""
    reasons = []
    if archetypes < asked:
        reasons.append(
            f"its {clusters} base clusters rolled up into {archetypes} archetypes, not the {asked} asked for "
            "(bring more transcripts or ask for fewer archetypes)"
        )
    if transcripts < MIN_TRANSCRIPTS_PER_CLUSTER * clusters:
        reasons.append(
            f"{transcripts / clusters:.0f} transcripts per base cluster is under the "
            f"{MIN_TRANSCRIPTS_PER_CLUSTER} a bootstrap "
            f"needs (about {MIN_TRANSCRIPTS_PER_CLUSTER * clusters:,} transcripts at this k)"
        )
    if not reasons:
        return None
    return (
        f"Derived from too few transcripts ({transcripts:,}): " + "; ".join(reasons) + ". No stability figure is given."
    )


class StudyTable(BaseModel):
    """A table of the study as plain strings, rendered by the CLI (rich) and by reports (HTML)."""

    title: str
    header: list[str]
    rows: list[list[str]]
    caption: str = ""

    def to_rich(self) -> Table:
        """The table for a terminal, every cell escaped (names and model output are not markup)."""
        out = Table(title=escape(self.title), caption=escape(self.caption) or None)
        for h in self.header:
            out.add_column(escape(h))
        for row in self.rows:
            out.add_row(*[escape(c) for c in row])
        return out


def study_tables(study: CodebookStudy, groups: Sequence[str]) -> list[StudyTable]:
    """The derived hierarchy, category shares per group, stability, and the comparison with the shipped codebook."""
    d, frozen = study.derived, study.frozen
    total = sum(a.size for a in d.archetypes)
    strategies_of = {a.id: len(a.children) for a in d.archetypes}
    category_of = d.parent_of("category")
    names = {c.id: c.name for c in d.categories}
    hierarchy = StudyTable(
        title=f"Derived codebook ({d.namer} naming, {d.embedder} vectors): {len(d.categories)} categories, "
        f"{len(d.archetypes)} archetypes, {len(d.strategies)} strategies, {len(d.base)} base clusters",
        header=["#", "archetype", "category", "share", "strategies", "distinguishing terms"],
        rows=[
            [
                str(i + 1),
                a.name,
                names[category_of[a.id]],
                f"{100 * a.size / total:.1f}%",
                str(strategies_of[a.id]),
                ", ".join(a.keywords),
            ]
            for i, a in enumerate(d.archetypes)
        ],
        caption="Each name comes from up to 50 members nearest the group's centre against the 50 nearest non-members.",
    )
    cats = [frozen.category_of(a).id for a in study.archetypes]
    dist = shares(cats, groups, [c.id for c in frozen.categories])
    by_group = StudyTable(
        title="Derived category shares per group (%), after reclassification against the frozen codebook",
        header=["category", *dist],
        rows=[[c.name, *[f"{100 * dist[g][c.id]:.0f}" for g in dist]] for c in frozen.categories],
    )
    if study.too_few is not None:
        rows = [["too few transcripts", study.too_few]]
    else:
        rows = [list(r) for r in study.stability.rows()] if study.stability is not None else []
        rows.append(["reclassified archetype = roll-up archetype", f"{100 * study.agreement:.1f}% of transcripts"])
    stab = StudyTable(title="Stability", header=["measure", "value"], rows=rows)
    cmp = study.comparison
    comparison = StudyTable(
        title=f"Derived vs shipped codebook: archetype ARI {cmp.archetype_ari:.3f}, AMI {cmp.archetype_ami:.3f}; "
        f"category ARI {cmp.category_ari:.3f}",
        header=["derived archetype", "transcripts", "shipped archetype most of them get", "share"],
        rows=[[name, f"{n:,}", shipped, f"{100 * share:.0f}%"] for name, n, shipped, share in cmp.rows],
        caption=(
            "Both classifications use the same vectors; the shipped one is the 14-archetype codebook written by hand."
        ),
    )
    return [hierarchy, by_group, stab, comparison]
