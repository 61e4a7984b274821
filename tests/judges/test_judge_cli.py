import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
import typer
from judge_factories import NULL_REPORT, build_transcript, claim
from typer.testing import CliRunner

from auditrl.auditworld.judges import JudgeParams, default_world, pairwise_share
from auditrl.auditworld.policies import ExperimenterPolicy, InterrogatorPolicy
from auditrl.auditworld.render import render_episodes
from auditrl.auditworld.simulate import simulate
from auditrl.auditworld.transcript_judges import SimBinaryJudge, SimConcerningnessJudge, SimPairwiseJudge
from auditrl.auditworld.world import training_batch
from auditrl.cli import judge as cli
from auditrl.judges.scripted import JudgeCall, scripted_judge_model
from auditrl.rewards.designs import BinaryMatch, InGroupPairwise, PointwiseConcerningness
from auditrl.scaffold.store import append_transcript, read_transcripts, write_transcripts
from auditrl.scaffold.transcript import Transcript

runner = CliRunner()


def _prefers_evidence(call: JudgeCall) -> dict:
    a_part = call.prompt.split('<transcript name="A">')[1].split('<transcript name="B">')[0]
    return {"winner": "A" if "EVIDENCE" in a_part else "B", "confidence": 80}


def test_pairwise_command(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(cli, "resolve_judge", lambda spec: scripted_judge_model(_prefers_evidence))
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    append_transcript(a, build_transcript("a1", exchanges=[("hi", "EVIDENCE")]))
    append_transcript(a, build_transcript("a2"))
    append_transcript(b, build_transcript("b1"))
    append_transcript(b, build_transcript("b2", exchanges=[("hi", "EVIDENCE")]))
    result = runner.invoke(cli.app, ["pairwise", str(a), str(b), "--judge", "scripted/judge"])
    assert result.exit_code == 0, result.output
    assert "position-bias rate: 0.00" in result.output and "A's mean share: 0.5" in result.output


def test_pairwise_command_reports_one_order_verdicts(tmp_path: Path, monkeypatch) -> None:
    def first_order_only(call: JudgeCall) -> dict | str:
        a_part = call.prompt.split('<transcript name="A">')[1].split('<transcript name="B">')[0]
        return {"winner": "A", "confidence": 70} if "from-a" in a_part else "no verdict"

    monkeypatch.setattr(cli, "resolve_judge", lambda spec: scripted_judge_model(first_order_only))
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    append_transcript(a, build_transcript("a1", exchanges=[("hi", "from-a")]))
    append_transcript(b, build_transcript("b1", exchanges=[("hi", "from-b")]))
    result = runner.invoke(
        cli.app, ["pairwise", str(a), str(b), "--judge", "scripted/judge", "--followups", "0"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert "unchecked: first only answered" in result.output
    assert (
        "position-bias rate: n/a; 1 decided by one order alone (the other abstained), so between 0.00 and 1.00"
        in result.output
    )


def test_score_command_writes_scores_beside_run(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(cli, "resolve_judge", lambda spec: scripted_judge_model(_prefers_evidence))
    run = tmp_path / "run"
    path = run / "transcripts.jsonl"
    for i, reply in enumerate(["EVIDENCE", "meh", "meh"]):
        append_transcript(path, build_transcript(f"p{i}", exchanges=[("hi", reply)]))
    for i, report in enumerate([NULL_REPORT, claim("hidden flattery")]):
        append_transcript(
            path,
            build_transcript(f"c{i}", behavior=None, report=report, exchanges=[("hi", "EVIDENCE" if i == 0 else "x")]),
        )
    result = runner.invoke(cli.app, ["score", str(run), "--design", "ingroup_pairwise", "--judge", "scripted/judge"])
    assert result.exit_code == 0, result.output
    scored = read_transcripts(run / "transcripts.scored-ingroup_pairwise.jsonl")
    rewards = [t.scores["ingroup_pairwise"]["reward"] for t in scored]
    assert rewards == [1.0, 0.25, 0.25, 1.0, 0.0]
    assert "mean reward 0.500" in result.output and "judge calls: 8" in result.output
    assert read_transcripts(path)[0].scores == {}


def test_score_programmatic_and_bad_design(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    append_transcript(path, build_transcript("e", reply_annotations=[{"expressed": True}], report=claim("flattery")))
    append_transcript(path, build_transcript("f", report=claim("flattery")))
    ok = runner.invoke(cli.app, ["score", str(path), "--design", "binary_strict", "--judge", "programmatic"])
    assert ok.exit_code == 0, ok.output
    rows = [json.loads(line) for line in (tmp_path / "t.scored-binary_strict.jsonl").read_text().splitlines()]
    assert [r["scores"]["binary_strict"]["reward"] for r in rows] == [1.0, 0.0]
    bad = runner.invoke(cli.app, ["score", str(path), "--design", "nope", "--judge", "programmatic"])
    assert bad.exit_code != 0 and "unknown reward design" in bad.output


def _cycled_audit_output(path: Path) -> None:
    """What `auditrl audit --rollouts 3` writes: seeds cycled, so each (behavior, seed, family) group has one
    rollout."""
    for i in range(3):
        append_transcript(path, build_transcript(f"p{i}", seed=f"s{i}", reply_annotations=[{"expressed": i == 0}]))
    append_transcript(path, build_transcript("b0", behavior=None, seed="g0", report=NULL_REPORT))


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("design", ["ingroup_pairwise", "ingroup_bradley_terry"])
def test_score_groups_of_one_are_not_scored_and_say_how_to_get_groups(tmp_path: Path, design: str) -> None:
    path = tmp_path / "transcripts.jsonl"
    _cycled_audit_output(path)
    result = runner.invoke(
        cli.app, ["score", str(path), "--design", design, "--judge", "programmatic"], env={"COLUMNS": "300"}
    )
    assert result.exit_code == 0, result.output
    assert "4 rollout(s) not scored: group of 1 (run audit with --seed-id ID --rollouts N for groups)" in result.output
    assert "no rollout scored (of 4)" in result.output
    assert "nan" not in result.output and "abstain" not in result.output and "Mean of empty slice" not in result.output
    entries = [t.scores[design] for t in read_transcripts(tmp_path / f"transcripts.scored-{design}.jsonl")]
    assert all(e["reward"] is None and e["not_scored"] == "group of 1" for e in entries)


def test_score_reports_real_abstentions_as_such(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(cli, "resolve_judge", lambda spec: scripted_judge_model(lambda call: "no verdict here"))
    path = tmp_path / "t.jsonl"
    for i in range(2):
        append_transcript(path, build_transcript(f"p{i}"))
    append_transcript(path, build_transcript("lone", seed="s9"))
    args = ["score", str(path), "--design", "ingroup_pairwise", "--judge", "scripted/judge", "--followups", "0"]
    result = runner.invoke(cli.app, args, env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "2 rollout(s) without a reward: the judge abstained" in result.output
    assert "1 rollout(s) not scored: group of 1" in result.output and "nan" not in result.output


def test_score_help_documents_the_grouping_rule() -> None:
    result = runner.invoke(cli.app, ["score", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "(behavior, seed, target family)" in text and "--seed-id ID --rollouts N" in text


def test_reference_pairwise_needs_references(tmp_path: Path) -> None:
    path = tmp_path / "run" / "transcripts.jsonl"
    for i in range(2):
        append_transcript(path, build_transcript(f"p{i}", reply_annotations=[{"expressed": i == 0}]))
    append_transcript(path, build_transcript("other", seed="s2"))
    base = ["score", str(path), "--design", "reference_pairwise", "--judge", "programmatic"]
    missing = runner.invoke(cli.app, base, env={"COLUMNS": "300"})
    assert missing.exit_code == 2 and "give --references FILE" in missing.output
    assert not (tmp_path / "run" / "transcripts.scored-reference_pairwise.jsonl").exists()
    refs = tmp_path / "refs.jsonl"
    append_transcript(refs, build_transcript("ref", reply_annotations=[{"expressed": True}]))
    ok = runner.invoke(cli.app, [*base, "--references", str(refs)], env={"COLUMNS": "300"})
    assert ok.exit_code == 0, ok.output
    scored = read_transcripts(tmp_path / "run" / "transcripts.scored-reference_pairwise.jsonl")
    assert [t.scores["reference_pairwise"]["reward"] for t in scored] == [0.5, 0.0, None]
    assert all(t.scores["reference_pairwise"].get("reference") == "ref" for t in scored[:2])
    assert "1 rollout(s) not scored: no reference for its (behavior, seed, family)" in ok.output
    itself = runner.invoke(cli.app, [*base, "--references", str(path)], env={"COLUMNS": "300"})
    assert (
        itself.exit_code == 0 and "not scored: is its own reference" in itself.output and "0.500" not in itself.output
    )
    absent = runner.invoke(cli.app, [*base, "--references", str(tmp_path / "nope.json")])
    assert absent.exit_code == 2 and "no such file" in absent.output


def test_pairwise_programmatic(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    append_transcript(a, build_transcript("a1", reply_annotations=[{"expressed": True}]))
    append_transcript(b, build_transcript("b1"))
    result = runner.invoke(cli.app, ["pairwise", str(a), str(b), "--judge", "programmatic"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "A's mean share: 1.00" in result.output and "position-bias rate: 0.00" in result.output


@pytest.mark.parametrize("command", ["pairwise", "score"])
def test_unknown_model_spec_is_a_one_line_error(tmp_path: Path, command: str) -> None:
    path = tmp_path / "t.jsonl"
    append_transcript(path, build_transcript("a1"))
    args = [str(path), str(path)] if command == "pairwise" else [str(path), "--design", "binary"]
    result = runner.invoke(cli.app, [command, *args, "--judge", "nope/model"], env={"COLUMNS": "2000"})
    assert result.exit_code == 2
    assert result.output.startswith("error: --judge nope/model: unknown model provider 'nope'")
    assert result.output.strip().count("\n") == 0 and "Traceback" not in result.output


def _auditworld_run(policy: object, benign_fraction: float, seed: int, tag: str) -> list[Transcript]:
    """A small AuditWorld rollout (4 groups of 3), rendered as the sim renders episodes."""
    world = default_world()
    rng = np.random.default_rng(seed)
    batch = training_batch(world, rng, 4, 3, benign_fraction, [0, 1, 2], 8)
    rollout = simulate(world, batch, policy, rng)  # type: ignore[arg-type]
    return render_episodes(world, rollout, range(batch.size), tag)


@pytest.mark.parametrize("design", ["concerningness", "binary", "binary_strict", "ingroup_pairwise"])
def test_score_sim_reproduces_auditworlds_own_per_transcript_judges(tmp_path: Path, design: str) -> None:
    transcripts = _auditworld_run(InterrogatorPolicy(), 0.5, seed=1, tag="p")
    path = tmp_path / "transcripts.jsonl"
    write_transcripts(path, transcripts)
    result = runner.invoke(cli.app, ["score", str(path), "--design", design, "--judge", "sim"])
    assert result.exit_code == 0, result.output
    got = [t.scores[design]["reward"] for t in read_transcripts(tmp_path / f"transcripts.scored-{design}.jsonl")]
    world = default_world()
    own = {
        "concerningness": PointwiseConcerningness(SimConcerningnessJudge(world)),
        "binary": BinaryMatch(SimBinaryJudge(world)),
        "binary_strict": BinaryMatch(SimBinaryJudge(world, strict=True)),
        "ingroup_pairwise": InGroupPairwise(SimPairwiseJudge(world)),
    }[design]
    want: list[float | None] = [None] * len(transcripts)
    for indices in cli.reward_groups(transcripts):
        for i, record in zip(indices, asyncio.run(own.score_group([transcripts[i] for i in indices])), strict=True):
            want[i] = record.reward
    assert got == pytest.approx(want)
    assert any(t.benign for t in transcripts) and len(set(got)) > 1


def test_score_sim_and_programmatic_differ_on_auditworld_transcripts(tmp_path: Path) -> None:
    """The two programmatic families are different judges: the generic one does not reproduce AuditWorld."""
    path = tmp_path / "transcripts.jsonl"
    write_transcripts(path, _auditworld_run(InterrogatorPolicy(), 0.5, seed=1, tag="p"))
    rewards = {}
    for judge in ("sim", "programmatic"):
        assert (
            runner.invoke(cli.app, ["score", str(path), "--design", "concerningness", "--judge", judge]).exit_code == 0
        )
        scored = read_transcripts(tmp_path / "transcripts.scored-concerningness.jsonl")
        rewards[judge] = [t.scores["concerningness"]["reward"] for t in scored]
    assert rewards["sim"] != rewards["programmatic"]


def test_pairwise_sim_matches_auditworlds_pairwise_judge(tmp_path: Path) -> None:
    a_list = _auditworld_run(ExperimenterPolicy(), 0.5, seed=2, tag="a")
    b_list = _auditworld_run(InterrogatorPolicy(), 0.5, seed=2, tag="b")  # same batch: A[i], B[i] comparable
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_transcripts(a, a_list)
    write_transcripts(b, b_list)
    result = runner.invoke(cli.app, ["pairwise", str(a), str(b), "--judge", "sim"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    judge = SimPairwiseJudge(default_world())
    (qa, ka), (qb, kb) = judge.quality(a_list), judge.quality(b_list)
    share, consistent = pairwise_share(qa, qb, ka, kb, JudgeParams())
    assert f"A's mean share: {share.mean():.2f}" in result.output
    assert f"position-bias rate: {1.0 - consistent.mean():.2f}" in result.output


def test_sim_judge_is_refused_where_only_models_or_annotations_judge(tmp_path: Path) -> None:
    with pytest.raises(typer.Exit):
        cli.judge_client("sim", None, 0)


def test_pairwise_table_keeps_transcript_ids_whole_at_80_columns(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    ids = ("e11d38e28e7c-flattery", "0c6d59a5fcfa-flattery")
    append_transcript(a, build_transcript(ids[0], reply_annotations=[{"expressed": True}]))
    append_transcript(b, build_transcript(ids[1]))
    result = runner.invoke(cli.app, ["pairwise", str(a), str(b), "--judge", "programmatic"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith("│ 0")]
    assert rows and all(len(line) <= 80 for line in result.output.splitlines())
    cells = [cell.strip() for cell in rows[0].split("│")]
    assert ids[0] in cells and ids[1] in cells, result.output
