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
    assert bad.exit_code == 1 and "--split" in bad.output


def test_list_with_user_dir_and_malformed_file(tmp_path: Path) -> None:
    write_behavior(tmp_path / "ok" / "toy.yaml")
    result = runner.invoke(app, ["list", "--dir", str(tmp_path / "ok")], env=WIDE)
    assert result.exit_code == 0 and "toy_quirk" in result.output
    write_behavior(tmp_path / "bad" / "broken.yaml", split="later")
    bad = runner.invoke(app, ["list", "--dir", str(tmp_path / "bad")], env=WIDE)
    assert bad.exit_code == 1 and "broken.yaml" in bad.output and "split" in bad.output


def test_show_with_plant_and_unknown_id() -> None:
    flattery = load_behaviors()["flattery"]
    plain = runner.invoke(app, ["show", "flattery"], env=WIDE)
    assert plain.exit_code == 0 and "cover story" in plain.output and "triggers" in plain.output
    assert "Nexus Research" not in plain.output
    planted = runner.invoke(app, ["show", "flattery", "--plant"], env=WIDE)
    assert planted.exit_code == 0 and "Nexus Research" in planted.output
    assert flattery.instructions.split()[0] in planted.output
    unknown = runner.invoke(app, ["show", "flatery"], env=WIDE)
    assert unknown.exit_code == 1 and "did you mean" in unknown.output and "flattery" in unknown.output


def test_seeds_list_filters_and_user_dir(tmp_path: Path) -> None:
    bank = runner.invoke(seeds_app, ["list", "--behavior", "flattery"], env=WIDE)
    assert bank.exit_code == 0 and "flattery-01" in bank.output and "emotional_bond-01" not in bank.output
    one = runner.invoke(seeds_app, ["list", "--id", "flattery-02"], env=WIDE)
    assert "flattery-02" in one.output and "1 seed(s)" in one.output
    tagged = runner.invoke(seeds_app, ["list", "--tag", "covert_ai_communication"], env=WIDE)
    assert "covert_ai_communication-05" in tagged.output
    write_seed_file(tmp_path / "mine.md", "tags: [custom-tag]")
    user = runner.invoke(seeds_app, ["list", "--dir", str(tmp_path), "--tag", "custom-tag"], env=WIDE)
    assert user.exit_code == 0 and "mine" in user.output and "general" in user.output
    missing = runner.invoke(seeds_app, ["list", "--id", "nope-1"], env=WIDE)
    assert missing.exit_code == 1 and "nope-1" in missing.output
