from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np
import pytest
import yaml
from inspect_ai.model import ModelOutput
from sklearn.metrics import adjusted_rand_score
from strategy_fixtures import tactic_transcripts

from auditrl.analysis.codebook import codebook_texts, load_codebook
from auditrl.analysis.derivation import CodebookStudy, derive_codebook, study_codebook, study_tables
from auditrl.analysis.llm_naming import LLMNamer, parse_roll_up
from auditrl.analysis.representation import Embedded, embed
from auditrl.analysis.stability import best_jaccard, stability
from auditrl.analysis.strategies import StrategyClusters, cluster_strategies
from auditrl.analysis.summaries import strategy_summaries

SIZES = {"strategy": 7, "archetype": 7, "category": 3}
PER_GROUP = 45  # 315 transcripts: enough per base cluster (k=12) for a stability figure


@cache
def _corpus() -> tuple[list[str], list[str]]:
    transcripts, truth = tactic_transcripts(PER_GROUP)
    return strategy_summaries(transcripts), truth


def _clustered(embedder: str = "lsa") -> tuple[list[str], list[str], Embedded, StrategyClusters]:
    texts, truth = _corpus()
    emb = embed(texts, codebook_texts(load_codebook()), embedder)  # type: ignore[arg-type]
    return texts, truth, emb, cluster_strategies(texts, k=12, embedded=emb)


@cache
def _study() -> tuple[list[str], CodebookStudy]:
    _, truth, emb, clusters = _clustered()
    return truth, study_codebook(clusters, emb, SIZES, bootstraps=2)


def test_embedding_counts_each_distinct_text_once() -> None:
    texts = ["alpha beta gamma", "delta epsilon", "alpha beta gamma", "zeta eta theta", "alpha beta gamma"]
    emb = embed(texts, ["beta delta"], "lsa")
    assert emb.embedder == "lsa" and len(emb.distinct) == 3
    assert [emb.distinct[i] for i in emb.inverse] == texts
    assert emb.counts[emb.distinct.index("alpha beta gamma")] == 3
    assert np.allclose(np.linalg.norm(emb.vectors, axis=1), 1.0)
    assert emb.vectors_of(["beta delta"]) is emb.extra and emb.transform(["alpha beta gamma"]).shape == (
        1,
        emb.vectors.shape[1],
    )


def test_auto_embedder_switches_to_lsa_above_the_minilm_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("auditrl.analysis.representation.MINILM_LIMIT", 2)
    assert embed(["rolled back twice", "pressed hard", "asked politely"], embedder="auto").embedder == "lsa"


def test_derived_codebook_recovers_the_tactics_and_nests_its_levels() -> None:
    truth, study = _study()
    d = study.derived
    assert 7 <= len(d.base) <= 12  # k=12 asked; weighted k-means may leave some empty on few distinct summaries
    assert (len(d.strategies), len(d.archetypes), len(d.categories)) == (7, 7, 3)
    assert (
        adjusted_rand_score(truth, study.archetypes) == 1.0
    )  # seven tactics, seven archetypes, after reclassification
    for upper, lower in ((d.strategies, d.base), (d.archetypes, d.strategies), (d.categories, d.archetypes)):
        children = [c for g in upper for c in g.children]
        assert sorted(children) == sorted(g.id for g in lower)  # a partition of the level below
        sizes = {g.id: g.size for g in lower}
        assert all(g.size == sum(sizes[c] for c in g.children) for g in upper)
    assert sum(g.size for g in d.categories) == len(truth)
    assert all(g.name and g.keywords and g.exemplars for g in [*d.base, *d.archetypes, *d.categories])
    assert study.agreement == 1.0 and d.namer == "offline" and not d.fallbacks


def test_frozen_codebook_round_trips_and_reclassifies(tmp_path: Path) -> None:
    texts, _, emb, clusters = _clustered()
    _, study = _study()
    path = tmp_path / "derived.yaml"
    path.write_text(yaml.safe_dump(study.frozen.model_dump(), sort_keys=False))
    book = load_codebook(path)
    assert [a.name for a in book.archetypes] == [a.name for a in study.derived.archetypes]
    again = cluster_strategies(texts, k=12, codebook=book, embedded=embed(texts, codebook_texts(book), "lsa"))
    assert again.archetypes == study.archetypes  # the frozen file classifies every transcript as the study did


def test_stability_and_comparison_are_reported() -> None:
    _, study = _study()
    assert study.stability is not None
    s = study.stability
    assert s.silhouette is not None and 0.0 < s.silhouette <= 1.0
    assert len(s.bootstrap_ari) == 2 and all(0.5 < a <= 1.0 for a in s.bootstrap_ari)
    assert len(s.jaccard) == len(study.derived.base) and all(0.0 < j <= 1.0 for j in s.jaccard)
    c = study.comparison
    assert -1.0 <= c.archetype_ari <= 1.0 and sum(n for _, n, _, _ in c.rows) == 7 * PER_GROUP
    titles = [t.title for t in study_tables(study, ["g"] * 7 * PER_GROUP)]
    assert titles[0].startswith("Derived codebook (offline naming, lsa vectors): 3 categories, 7 archetypes")
    assert any(t.startswith("Derived vs shipped codebook") for t in titles)


def test_best_jaccard_weighs_points() -> None:
    ref = np.array([0, 0, 1, 1])
    other = np.array([0, 1, 1, 1])
    weights = np.array([3.0, 1.0, 1.0, 1.0])
    # cluster 0 = {3 copies of a, b} vs other 0 = {a x3}: 3/4; cluster 1 = {c, d} vs other 1 = {b, c, d}: 2/3
    assert np.allclose(best_jaccard(ref, other, weights), [0.75, 2 / 3])


def test_stability_of_well_separated_clusters_is_perfect() -> None:
    rng = np.random.default_rng(0)
    centers = np.eye(4, 8)
    points = np.repeat(centers, 30, axis=0) + 0.01 * rng.standard_normal((120, 8))
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    emb = Embedded(
        "lsa",
        [str(i) for i in range(120)],
        points,
        np.ones(120),
        np.arange(120),
        [],
        np.zeros((0, 8)),
        lambda t: np.zeros((len(t), 8)),
    )
    s = stability(emb, np.repeat(np.arange(4), 30), bootstraps=3, seed=1)
    assert (
        s.bootstrap_ari == [1.0, 1.0, 1.0]
        and s.jaccard == [1.0] * 4
        and s.silhouette is not None
        and s.silhouette > 0.9
    )


class _Namer:
    """A scripted naming model's stand-in: names every group, rolls up as told or abstains."""

    label = "scripted/namer"

    def __init__(self, roll_ups: dict[int, list[int] | None]) -> None:
        self.roll_ups = roll_ups
        self.asked: list[int] = []

    def name_groups(self, groups: Sequence[tuple[Sequence[str], Sequence[str]]]) -> list[tuple[str, str] | None]:
        return [None if i == 0 else (f"named {len(m)} vs {len(o)}", "by the model") for i, (m, o) in enumerate(groups)]

    def roll_up(self, children: Sequence[tuple[str, str]], groups: int) -> list[int] | None:
        self.asked.append(len(children))
        return self.roll_ups.get(len(children))


def test_a_naming_model_names_and_rolls_up_and_abstentions_fall_back() -> None:
    _, truth, emb, clusters = _clustered()
    first = np.unique(emb.inverse, return_index=True)[1]
    base = np.asarray(clusters.labels)[first]
    n = len(set(base.tolist()))
    namer = _Namer({n: [i % 3 for i in range(n)], 3: None, 2: [0, 0]})
    book, assigned = derive_codebook(emb, base, {"strategy": 3, "archetype": 2, "category": 2}, namer)
    assert namer.asked == [n, 3, 2]
    assert [s.children for s in book.strategies] == [[f"b{i}" for i in range(n) if i % 3 == g] for g in range(3)]
    assert [c.children for c in book.categories] == [["a0", "a1"]]  # the model put both archetypes in one category
    assert book.archetypes[1].name.startswith("named ") and book.archetypes[1].description == "by the model"
    assert book.namer == "scripted/namer"
    assert any(f.startswith("archetype: the naming model gave no valid roll-up") for f in book.fallbacks)
    assert f"base: the naming model abstained on 1 of {n} groups, named offline" in book.fallbacks
    assert len(assigned["category"]) == len(emb.distinct)


def test_roll_up_replies_must_partition_the_children() -> None:
    assert parse_roll_up('Here: [{"name": "x", "members": [1, 3]}, {"name": "y", "members": [2]}]', 3, 2) == [0, 1, 0]
    assert parse_roll_up('[{"name": "x", "members": [1, 2]}]', 3, 2) is None  # child 3 left out
    assert parse_roll_up('[{"members": [1, 2]}, {"members": [2, 3]}]', 3, 2) is None  # child 2 twice
    assert parse_roll_up('[{"members": [1]}, {"members": [2]}, {"members": [3]}]', 3, 2) is None  # too many groups
    assert parse_roll_up("no list", 3, 2) is None


class _Replies:
    """Stands in for an inspect-ai Model: replays fixed completions."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)

    async def generate(self, messages: list, config: object = None) -> ModelOutput:
        return ModelOutput.from_content("fake/model", self.replies.pop(0))


def test_llm_namer_retries_then_abstains() -> None:
    model = _Replies("nonsense", "<name>Compare branches</name><description>Re-runs probes.</description>", "x", "y")
    namer = LLMNamer(model, "fake/model", retries=1)  # type: ignore[arg-type]
    assert namer.name_groups([(["a summary"], ["a neighbour"])]) == [("Compare branches", "Re-runs probes.")]
    assert namer.roll_up([("a", "b"), ("c", "d")], 1) is None  # two malformed replies, then it abstains
    assert model.replies == []


def test_a_codebook_derived_from_too_few_transcripts_says_so_instead_of_a_stability_figure() -> None:
    transcripts, _ = tactic_transcripts(
        4
    )  # 28 transcripts in 4 base clusters: 7 per cluster, and 4 archetypes where 7 are asked for
    texts = strategy_summaries(transcripts)
    emb = embed(texts, codebook_texts(load_codebook()), "lsa")
    study = study_codebook(cluster_strategies(texts, k=4, embedded=emb), emb, SIZES, bootstraps=3)
    assert study.stability is None and study.too_few is not None
    assert study.too_few.startswith(
        "Derived from too few transcripts (28): its 4 base clusters rolled up into 4 archetypes, not the 7"
    )
    assert (
        "7 transcripts per base cluster is under the 25 a bootstrap needs (about 100 transcripts at this k)"
        in study.too_few
    )
    stab = next(t for t in study_tables(study, ["g"] * 28) if t.title == "Stability")
    assert stab.rows == [["too few transcripts", study.too_few]]
