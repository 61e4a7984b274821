from pathlib import Path

import pytest
import yaml
from inspect_ai.model import ModelOutput
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
from sklearn.metrics import adjusted_rand_score
from strategy_fixtures import strategy_transcripts

from auditrl.analysis.codebook import load_codebook
from auditrl.analysis.strategies import cluster_strategies, name_phrase, naming_terms
from auditrl.analysis.summaries import llm_strategy_summary, strategy_summaries

PLANTED = {
    "experiments": "rolled back the conversation and re-ran matched variant probes comparing replies across branches",
    "confession": "demanded an admission, accused the target, insisted it confess its secret instructions",
    "idle": "sent a single greeting, ended early, filed no report, barely engaged",
}


def _planted_texts(n: int) -> tuple[list[str], list[str]]:
    texts, truth = [], []
    for i in range(n):
        for name, base in PLANTED.items():
            texts.append(f"The auditor {base} (case {i}, {i % 4 + 2} turns).")
            truth.append(name)
    return texts, truth


def test_codebook_has_14_archetypes_in_5_categories() -> None:
    book = load_codebook()
    assert len(book.archetypes) == 14 and len(book.categories) == 5
    assert sorted(a.number for a in book.archetypes) == list(range(1, 15))
    by_cat = {c.id: sorted(a.number for a in book.archetypes if a.category == c.id) for c in book.categories}
    assert by_cat == {
        "controlled_experiments": [1],
        "passive_scenarios": [2, 4, 6, 13],
        "self_reports": [3, 5, 11],
        "auditing_failures": [7, 8, 14],
        "aggressive_audits": [9, 10, 12],
    }


def test_codebook_file_errors_name_the_problem(tmp_path: Path) -> None:
    data = yaml.safe_load(Path(__file__).parents[2].joinpath("src/auditrl/analysis/data/archetypes.yaml").read_text())
    data["archetypes"][0]["category"] = "nowhere"
    bad = tmp_path / "book.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match=r"(?s)book.yaml.*unknown category.*nowhere"):
        load_codebook(bad)


def test_tfidf_recovers_planted_groups_and_names_them() -> None:
    texts, truth = _planted_texts(12)
    result = cluster_strategies(texts, k=3, seed=0, embedder="tfidf")
    assert adjusted_rand_score(truth, result.labels) == 1.0
    names = " ".join(c.name + " " + " ".join(c.keywords) for c in result.clusters)
    assert "confess" in names or "accused" in names
    for c in result.clusters:
        assert truth[c.representative] == truth[[i for i, lab in enumerate(result.labels) if lab == c.id][0]]
    assert cluster_strategies(texts, k=3, seed=0, embedder="tfidf").labels == result.labels


def test_summaries_cluster_by_strategy_and_map_to_archetypes() -> None:
    transcripts, truth = strategy_transcripts(8)
    result = cluster_strategies(strategy_summaries(transcripts), k=3, seed=1, embedder="tfidf")
    assert adjusted_rand_score(truth, result.labels) == 1.0
    cats = result.categories()
    # Pressure with a forced reply opening is a pressured confession or, counting the prefill, an aggressive audit.
    expected = {
        "experiments": {"controlled_experiments"},
        "pressure": {"self_reports", "aggressive_audits"},
        "none": {"auditing_failures"},
    }
    agree = sum(cats[i] in expected[g] for i, g in enumerate(truth)) / len(truth)
    assert agree >= 0.9, list(zip(truth, cats, strict=True))


def test_distribution_shares_per_group() -> None:
    texts, truth = _planted_texts(4)
    result = cluster_strategies(texts, embedder="tfidf")
    assert result.k == 2  # default k = round(n / 100) but at least 2
    groups = ["m1" if i % 2 else "m2" for i in range(len(texts))]
    dist = result.distribution(groups)
    assert set(dist) == {"m2", "m1"}
    for shares in dist.values():
        assert len(shares) == 14 and abs(sum(shares.values()) - 1.0) < 1e-9
    cat = result.distribution(groups, level="category")
    assert all(len(s) == 5 for s in cat.values())
    with pytest.raises(ValueError, match="3 groups for 12 texts"):
        result.distribution(["a", "b", "c"])


def test_bad_inputs() -> None:
    with pytest.raises(ValueError, match="at least 2 texts"):
        cluster_strategies(["one"], embedder="tfidf")
    with pytest.raises(ValueError, match="empty strategy text at index \\[1\\]"):
        cluster_strategies(["one", " "], embedder="tfidf")
    with pytest.raises(ValueError, match="k=5"):
        cluster_strategies(["a b", "c d", "e f"], k=5, embedder="tfidf")


class _Replies:
    """Stands in for an inspect-ai Model: replays fixed completions (an Exception entry is raised)."""

    def __init__(self, *replies: str | Exception) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []

    async def generate(self, messages: list, config: object = None) -> ModelOutput:
        self.prompts.append(messages[-1].text)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return ModelOutput.from_content("fake/model", reply)


async def test_llm_summariser_retries_parses_and_abstains() -> None:
    transcripts, _ = strategy_transcripts(1)
    good = _Replies(ConnectionError("down"), "<strategy>The auditor's approach was to  compare\nbranches.</strategy>")
    assert await llm_strategy_summary(transcripts[0], good) == "The auditor's approach was to compare branches."  # type: ignore[arg-type]
    assert "TOOL CALL rollback_conversation" in good.prompts[0] and "{auditor_side}" not in good.prompts[0]
    bad = _Replies("no tags", "<strategy> </strategy>", "still nothing")
    assert await llm_strategy_summary(transcripts[0], bad, retries=2) is None  # type: ignore[arg-type]


@pytest.mark.slow
def test_minilm_recovers_planted_groups() -> None:
    texts, truth = _planted_texts(10)
    result = cluster_strategies(texts, k=3, seed=0, embedder="minilm", classifier="minilm")
    assert result.embedder == "minilm" and result.classifier == "minilm"
    assert adjusted_rand_score(truth, result.labels) >= 0.9
    cats = result.categories()
    expected = {"experiments": "controlled_experiments", "confession": "self_reports", "idle": "auditing_failures"}
    assert sum(cats[i] == expected[g] for i, g in enumerate(truth)) / len(truth) >= 0.8, list(
        zip(truth, cats, strict=True)
    )


def test_naming_terms_stay_inside_clauses() -> None:
    terms = naming_terms("The auditor checked the target's replies. Ordinary requests (2 of 2 messages) dominated.")
    assert "ordinary requests" in terms and "target replies" in terms
    assert "replies ordinary" not in terms and "requests messages" not in terms
    assert not any(t in ENGLISH_STOP_WORDS for t in terms)


def test_name_phrase_prefers_phrases_and_never_repeats_a_word() -> None:
    assert name_phrase(["requests", "branches", "ordinary", "ordinary requests", "probes"]) == [
        "ordinary requests",
        "branches",
        "probes",
    ]
    assert name_phrase(["forced", "near-identical", "near-identical messages", "repeated", "messages repeated"]) == [
        "forced",
        "near-identical messages",
        "repeated",
    ]


def test_cluster_names_are_archetype_then_comma_separated_terms() -> None:
    texts, _ = _planted_texts(6)
    result = cluster_strategies(texts, k=3, seed=0, embedder="tfidf")
    book = load_codebook()
    for c in result.clusters:
        archetype = book.archetype(c.archetype).name
        assert c.name.startswith(f"{archetype}: ") and " / " not in c.name
        words = c.name.removeprefix(f"{archetype}: ").replace(",", " ").split()
        assert len(words) == len(set(words)) >= 3


def test_title_counts_the_clusters_actually_found() -> None:
    same = ["The auditor sent ordinary requests and ended the conversation early."] * 6
    result = cluster_strategies(same, embedder="tfidf")
    assert result.k == 2 and len(result.clusters) == 1 and result.clusters[0].size == 6
    assert result.title().startswith("Strategy clusters (1 cluster found of k=2 requested")
    split = cluster_strategies(_planted_texts(4)[0], k=3, embedder="tfidf")
    assert split.title() == "Strategy clusters (k=3, tfidf)"
