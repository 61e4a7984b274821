"""One assignment of archetypes: it depends on the summary and the codebook, nothing else."""

from __future__ import annotations

import pytest
from strategy_fixtures import tactic_transcripts

from auditrl.analysis.assignment import StrategyAssignment, assign_strategies
from auditrl.analysis.codebook import codebook_texts, load_codebook
from auditrl.analysis.convergence import convergence_table, strategy_convergence
from auditrl.analysis.representation import embed
from auditrl.analysis.strategies import cluster_strategies
from auditrl.analysis.summaries import strategy_summaries


def _texts() -> list[str]:
    transcripts, _ = tactic_transcripts(5)
    return strategy_summaries(transcripts)


def test_archetypes_depend_on_neither_the_corpus_nor_the_representation_nor_k() -> None:
    texts = _texts()
    whole = assign_strategies(texts)
    assert assign_strategies(texts[:7]).archetypes == whole.archetypes[:7]  # a sample gets what the whole run gives it
    assert assign_strategies(texts[::-1]).archetypes == whole.archetypes[::-1]
    for embedder, k in (("tfidf", 2), ("lsa", 6), ("tfidf", 12)):
        assert cluster_strategies(texts, k=k, embedder=embedder).archetypes == whole.archetypes  # type: ignore[arg-type]
    assert len(set(whole.categories())) >= 3 and all(m >= 0.0 for m in whole.margin)


def test_bad_summaries_are_refused_by_index() -> None:
    with pytest.raises(ValueError, match=r"empty strategy text at index \[1\]"):
        assign_strategies(["It sent 3 messages.", "  "])
    with pytest.raises(ValueError, match=r"index \[1\] shares no word with the codebook.*minilm"):
        assign_strategies(["The auditor sent messages to the target.", "zzzz qqqq"])
    with pytest.raises(ValueError, match="unknown strategy classifier 'bert'"):
        assign_strategies(["The auditor sent messages."], classifier="bert")  # type: ignore[arg-type]


@pytest.mark.slow
def test_minilm_clusters_keep_the_archetypes_and_the_minilm_classifier_reuses_their_vectors() -> None:
    texts = _texts()
    emb = embed(texts, codebook_texts(load_codebook()), "minilm")
    assert (
        cluster_strategies(texts, k=3, embedder="minilm", embedded=emb).archetypes
        == assign_strategies(texts).archetypes
    )
    assert assign_strategies(texts, classifier="minilm", embedded=emb) == assign_strategies(texts, classifier="minilm")


def _assigned(categories_per_group: dict[str, list[str]]) -> tuple[StrategyAssignment, list[str], list[int]]:
    book = load_codebook()
    first = {c.id: next(a.id for a in book.archetypes if a.category == c.id) for c in book.categories}
    archetypes, groups, seeds = [], [], []
    for group, cats in categories_per_group.items():
        archetypes += [first[c] for c in cats]
        groups += [group] * len(cats)
        seeds += [i % 2 for i in range(len(cats))]
    n = len(archetypes)
    return (
        StrategyAssignment(
            archetypes=archetypes, similarity=[1.0] * n, margin=[0.0] * n, codebook=book, classifier="lsa"
        ),
        groups,
        seeds,
    )


def test_convergence_rows_check_each_design_against_the_paper() -> None:
    assigned, groups, seeds = _assigned({
        "ref_cal": ["controlled_experiments"] * 3 + ["auditing_failures"],
        "bin": ["self_reports"] * 3 + ["aggressive_audits"],
        "conc": ["auditing_failures", "self_reports", "self_reports", "passive_scenarios"],
        "ref": ["controlled_experiments"] * 4,
    })  # fmt: skip
    runs = [
        ("ref_cal", "reference_pairwise", 0.5),
        ("bin", "binary", 0.0),
        ("conc", "concerningness", 0.0),
        ("ref", "reference_pairwise", 0.0),
    ]
    rows = {(r.run, r.best): r for r in strategy_convergence(assigned, groups, runs, best="bin", seeds=seeds)}
    assert set(rows) == {
        ("ref_cal", False),
        ("bin", False),
        ("conc", False),
        ("bin", True),
    }  # uncalibrated ref: no finding to check
    assert (
        rows["ref_cal", False].share == 0.75
        and rows["ref_cal", False].converged
        and rows["ref_cal", False].seed_shares == [1.0, 0.5]
    )
    assert (
        rows["bin", False].share == 0.25
        and not rows["bin", False].converged
        and rows["bin", False].top == "self_reports"
    )
    assert rows["conc", False].share == 0.75 and rows["bin", True].expected == ["controlled_experiments"]
    table = convergence_table(list(rows.values()), assigned)
    verdicts = {row[0]: row[-2] for row in table.rows}
    assert (
        verdicts["ref_cal"] == "as the paper"
        and verdicts["bin (best here)"] == "differs: mostly Self-reports and pressured confessions (75%)"
    )
    assert table.rows[0][2] == "75% (seeds 50%-100%)"
