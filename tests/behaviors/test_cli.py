"""`behaviors list|show` and `seeds list` through typer's test runner."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from auditrl.behaviors.library import load_behaviors
from auditrl.cli.behaviors import app, seeds_app

from .conftest import write_behavior, write_seed_file

runner = CliRunner()
WIDE = {"COLUMNS": "240"}


def test_list_all_and_filter_by_split_and_tag() -> None:
    result = runner.invoke(app, ["list"], env=WIDE)
    assert result.exit_code == 0, result.output
    for bid in load_behaviors():
        assert bid in result.output
    heldout = runner.invoke(app, ["list", "--split", "heldout"], env=WIDE)
    assert "secret_loyalty" in heldout.output and "flattery" not in heldout.output
    assert "6 behavior(s)" in heldout.output
    tagged = runner.invoke(app, ["list", "--tag", "sycophancy"], env=WIDE)
    assert "flattery" in tagged.output and "reward_wireheading" not in tagged.output
    bad = runner.invoke(app, ["list", "--split", "dev"], env=WIDE)
    assert bad.exit_code == 2 and "--split" in bad.output


def test_list_with_user_dir_and_malformed_file(tmp_path: Path) -> None:
    write_behavior(tmp_path / "ok" / "toy.yaml")
    result = runner.invoke(app, ["list", "--behaviors-dir", str(tmp_path / "ok")], env=WIDE)
    assert result.exit_code == 0 and "toy_quirk" in result.output
    assert "overrides" not in result.output
    write_behavior(tmp_path / "bad" / "broken.yaml", split="later")
    bad = runner.invoke(app, ["list", "--behaviors-dir", str(tmp_path / "bad")], env=WIDE)
    assert bad.exit_code == 2 and "broken.yaml" in bad.output and "split" in bad.output


def test_overrides_are_reported(tmp_path: Path) -> None:
    mine = write_behavior(tmp_path / "b" / "flattery.yaml", id="flattery", name="My flattery")
    seed = write_seed_file(tmp_path / "s" / "flattery-01.md", "id: flattery-01\ntags: [flattery]")
    listed = runner.invoke(
        app, ["list", "--behaviors-dir", str(tmp_path / "b"), "--seeds-dir", str(tmp_path / "s")], env=WIDE
    )
    assert listed.exit_code == 0, listed.output
    assert f"user file {mine} overrides built-in behavior flattery" in listed.output
    assert f"user file {seed} overrides built-in seed flattery-01" in listed.output
    shown = runner.invoke(app, ["show", "flattery", "--behaviors-dir", str(tmp_path / "b")], env=WIDE)
    assert shown.exit_code == 0 and "My flattery" in shown.output and "overrides built-in behavior" in shown.output
    seeds = runner.invoke(seeds_app, ["list", "--seeds-dir", str(tmp_path / "s")], env=WIDE)
    assert seeds.exit_code == 0 and f"user file {seed} overrides built-in seed flattery-01" in seeds.output


def test_several_bad_files_are_reported_in_one_error(tmp_path: Path) -> None:
    first = write_seed_file(tmp_path / "a.md", "id: a\ntags: [t]\nbehavior: nonexistent_beh")
    second = write_seed_file(tmp_path / "b.md", "id: b\ntags: 5")
    result = runner.invoke(seeds_app, ["list", "--seeds-dir", str(tmp_path)], env=WIDE)
    assert result.exit_code == 2
    assert f"{first}: field 'behavior': unknown behavior 'nonexistent_beh'" in result.output
    assert f"{second}: field 'tags'" in result.output and "2 problems" in result.output


def test_dir_flags_are_the_same_on_every_command() -> None:
    for target, command in ((app, "list"), (app, "show"), (seeds_app, "list")):
        help_text = runner.invoke(target, [command, "--help"], env=WIDE).output
        assert "--behaviors-dir" in help_text and "same ids override" in help_text, command
        assert "--dir " not in help_text and "--seed-dir" not in help_text
    for target, command in ((app, "list"), (seeds_app, "list")):
        assert "--seeds-dir" in runner.invoke(target, [command, "--help"], env=WIDE).output


def test_show_with_plant_and_unknown_id() -> None:
    flattery = load_behaviors()["flattery"]
    plain = runner.invoke(app, ["show", "flattery"], env=WIDE)
    assert plain.exit_code == 0 and "cover story" in plain.output and "triggers" in plain.output
    assert "Nexus Research" not in plain.output
    planted = runner.invoke(app, ["show", "flattery", "--plant"], env=WIDE)
    assert planted.exit_code == 0 and "Nexus Research" in planted.output
    assert flattery.instructions.split()[0] in planted.output
    unknown = runner.invoke(app, ["show", "flatery"], env=WIDE)
    assert unknown.exit_code == 2 and "did you mean" in unknown.output and "flattery" in unknown.output


def test_seeds_list_filters_and_user_dir(tmp_path: Path) -> None:
    bank = runner.invoke(seeds_app, ["list", "--behavior", "flattery"], env=WIDE)
    assert bank.exit_code == 0 and "flattery-01" in bank.output and "emotional_bond-01" not in bank.output
    one = runner.invoke(seeds_app, ["list", "--seed-id", "flattery-02"], env=WIDE)
    assert "flattery-02" in one.output and "1 seed(s)" in one.output
    tagged = runner.invoke(seeds_app, ["list", "--tag", "covert_ai_communication"], env=WIDE)
    assert "covert_ai_communication-05" in tagged.output
    write_seed_file(tmp_path / "mine.md", "tags: [custom-tag]")
    user = runner.invoke(seeds_app, ["list", "--seeds-dir", str(tmp_path), "--tag", "custom-tag"], env=WIDE)
    assert user.exit_code == 0 and "mine" in user.output and "general" in user.output
    missing = runner.invoke(seeds_app, ["list", "--seed-id", "nope-1"], env=WIDE)
    assert missing.exit_code == 2 and "nope-1" in missing.output
    general = runner.invoke(seeds_app, ["list", "--behavior", "general"], env=WIDE)
    assert general.exit_code == 0 and "general" in general.output


def test_seeds_list_unknown_behavior_fails_with_a_hint() -> None:
    typo = runner.invoke(seeds_app, ["list", "--behavior", "flatery"], env=WIDE)
    assert typo.exit_code == 2 and "unknown behavior 'flatery'" in typo.output
    assert "did you mean: flattery" in typo.output
    nope = runner.invoke(seeds_app, ["list", "--behavior", "nope"], env=WIDE)
    assert nope.exit_code == 2 and "unknown behavior 'nope'" in nope.output


def test_seeds_of_a_user_behavior(tmp_path: Path) -> None:
    write_behavior(tmp_path / "b" / "toy.yaml")
    write_seed_file(tmp_path / "s" / "toy-1.md", "id: toy-1\ntags: [toy]\nbehavior: toy_quirk")
    both = ["--seeds-dir", str(tmp_path / "s"), "--behaviors-dir", str(tmp_path / "b")]
    result = runner.invoke(seeds_app, ["list", "--behavior", "toy_quirk", *both], env=WIDE)
    assert result.exit_code == 0 and "toy-1" in result.output and "1 seed(s)" in result.output
    without = runner.invoke(seeds_app, ["list", "--seeds-dir", str(tmp_path / "s")], env=WIDE)
    assert without.exit_code == 2 and "toy-1.md: field 'behavior': unknown behavior 'toy_quirk'" in without.output
