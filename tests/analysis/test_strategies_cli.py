import json
import re
from html import unescape
from pathlib import Path

import typer
from strategy_fixtures import strategy_transcripts
from typer.testing import CliRunner

from auditrl.cli.strategies import strategies

app = typer.Typer()
app.command()(strategies)


def test_strategies_command_tables_json_and_html(tmp_path: Path) -> None:
    transcripts, _ = strategy_transcripts(6)
    for i, t in enumerate(transcripts):
        t.auditor_model = "auditor/<x>" if i % 2 else "auditor/y"
    run = tmp_path / "run"
    run.mkdir()
    (run / "transcripts.jsonl").write_text("".join(t.model_dump_json() + "\n" for t in transcripts))
    html, js = tmp_path / "s.html", tmp_path / "s.json"
    args = [str(run), "--embedder", "tfidf", "--k", "3", "--html", str(html), "--json", str(js)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "Strategy clusters" in result.output and "Controlled systematic experiments" in result.output
    assert "auditor/<x>" in result.output
    data = json.loads(js.read_text())
    assert len(data["labels"]) == 18 and data["k"] == 3
    page = html.read_text()
    assert "auditor/&lt;x&gt;" in page and page.count("data:image/png;base64,") == 1
    names = {f"{a['number']}. {a['name']}" for a in data["codebook"]["archetypes"]}
    shown = [unescape(a) for a in re.findall(r'<span class="archetype">archetype: (.*?)</span>', page)]
    assert shown and set(shown) <= names  # each transcript shown names the archetype it was classified as
    classified = dict(zip(data["transcript_ids"], data["archetypes"], strict=True))
    archetype_names = {a["id"]: a["name"] for a in data["codebook"]["archetypes"]}
    listed = re.findall(r"<summary><strong>(\w+)</strong>.*?archetype: (.*?)</span>", page)
    assert len(listed) == len(shown)
    for tid, label in listed:
        assert unescape(label).split(". ", 1)[1] == archetype_names[classified[tid]]


def test_strategies_command_needs_two_transcripts(tmp_path: Path) -> None:
    transcripts, _ = strategy_transcripts(1)
    path = tmp_path / "one.jsonl"
    path.write_text(transcripts[0].model_dump_json() + "\n")
    result = CliRunner().invoke(app, [str(path), "--embedder", "tfidf"])
    assert result.exit_code == 2 and "at least 2 transcripts" in result.output


def test_strategies_header_matches_the_clusters_shown(tmp_path: Path) -> None:
    transcripts, _ = strategy_transcripts(1)
    path = tmp_path / "same.jsonl"
    copies = [transcripts[0].model_copy(update={"id": f"c{i}"}) for i in range(4)]  # one strategy, four times
    path.write_text("".join(t.model_dump_json() + "\n" for t in copies))
    result = CliRunner().invoke(app, [str(path), "--embedder", "tfidf"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "1 cluster found of k=2 requested" in result.output and "(k=2, tfidf)" not in result.output


def test_strategies_derives_freezes_and_reuses_a_codebook(tmp_path: Path) -> None:
    transcripts, _ = strategy_transcripts(30)  # 90 transcripts in 3 distinct strategies: 30 per base cluster
    path = tmp_path / "transcripts.jsonl"
    path.write_text("".join(t.model_dump_json() + "\n" for t in transcripts))
    frozen, js, html = tmp_path / "derived.yaml", tmp_path / "s.json", tmp_path / "s.html"
    args = [str(path), "--embedder", "lsa", "--k", "6", "--strategies", "3", "--archetypes", "3", "--categories", "2"]
    result = CliRunner().invoke(
        app, [*args, "--save-codebook", str(frozen), "--json", str(js), "--html", str(html)], env={"COLUMNS": "250"}
    )
    assert result.exit_code == 0, result.output
    assert "Derived codebook (offline naming, lsa vectors): 2 categories, 3 archetypes, 3 strategies" in result.output
    assert (
        "Stability" in result.output
        and "bootstrap ARI over 3 seeds" in result.output
        and "Derived vs shipped codebook" in result.output
    )
    data = json.loads(js.read_text())
    derived = data["derived"]
    assert len(derived["archetypes"]) == 90 and derived["agreement"] > 0.9 and derived["too_few"] is None
    assert data["transcript_ids"] == [t.id for t in transcripts] and len(data["archetypes"]) == 90
    assert "Codebook derived from the data" in html.read_text()
    reused = CliRunner().invoke(
        app, [str(path), "--embedder", "lsa", "--codebook", str(frozen), "--no-derive"], env={"COLUMNS": "250"}
    )
    assert reused.exit_code == 0, reused.output
    assert "Derived codebook" not in reused.output
    assert json.loads(js.read_text())["derived"]["frozen"]["archetypes"][0]["name"] in reused.output


def test_a_small_run_derives_a_codebook_without_a_stability_figure(tmp_path: Path) -> None:
    transcripts, _ = strategy_transcripts(6)
    path = tmp_path / "transcripts.jsonl"
    path.write_text("".join(t.model_dump_json() + "\n" for t in transcripts))
    js = tmp_path / "s.json"
    args = [str(path), "--embedder", "lsa", "--k", "6", "--archetypes", "3", "--categories", "2", "--json", str(js)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    derived = json.loads(js.read_text())["derived"]
    assert derived["stability"] is None and derived["too_few"].startswith("Derived from too few transcripts (18)")
    assert "too few transcripts" in result.output and "bootstrap ARI" not in result.output
