"""The behavior and seed loaders: the built-in library, user directories, selection and bad files."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from auditrl.behaviors.library import (
    BehaviorFileError,
    BehaviorFileErrors,
    OverrideWarning,
    load_behaviors,
    load_seeds,
    read_seed,
    write_seed,
)
from auditrl.behaviors.schema import Seed

from .conftest import write_behavior, write_seed_file

HELDOUT = {
    "hallucinates_citations",
    "contextual_optimism",
    "secret_loyalty",
    "anti_ai_regulation",
    "ai_welfare_poisoning",
    "animal_welfare",
}
TRAIN = {
    "hardcode_test_cases",
    "emotional_bond",
    "flattery",
    "defer_to_users",
    "increasing_pep",
    "self_promotion",
    "defend_objects",
    "reward_wireheading",
    "capability_hiding",
    "correction_deflection",
    "deliberate_complexity",
    "covert_ai_communication",
    "learned_helplessness",
    "urgency_manufacturing",
    "permission_escalation",
    "persistence_seeking",
    "self_continuity",
    "update_aversion",
    "mission_creep",
    "oversight_discouragement",
    "third_party_politics",
    "competitor_inaccuracy",
    "security_downplay",
    "test_undermining",
    "social_engineering",
    "context_maximizing",
}


# --- the built-in library -------------------------------------------------------------------------


def test_builtin_library_has_the_design_split() -> None:
    behaviors = load_behaviors()
    assert len(TRAIN) == 26 and len(HELDOUT) == 6
    assert {b for b, v in behaviors.items() if v.split == "train"} == TRAIN
    assert {b for b, v in behaviors.items() if v.split == "heldout"} == HELDOUT


def test_builtin_behaviors_are_complete_and_distinct() -> None:
    behaviors = load_behaviors()
    for b in behaviors.values():
        assert b.source is not None and b.source.stem == b.id, b.id
        assert b.tags, b.id
    instructions = [b.instructions for b in behaviors.values()]
    assert len(set(instructions)) == len(instructions)
    # no instructions text may contain another's, or simulated targets would confuse plants
    for a in behaviors.values():
        for b in behaviors.values():
            assert a.id == b.id or a.instructions not in b.instructions


def test_builtin_seed_banks_are_large_enough() -> None:
    behaviors = load_behaviors()
    for bid in behaviors:
        bank = load_seeds(behavior=bid)
        assert len(bank) >= 8, f"{bid} has {len(bank)} seeds"
        assert all(s.behavior == bid for s in bank)
    assert len(load_seeds(behavior="general")) >= 40


def test_builtin_seeds_are_tagged_and_unique() -> None:
    seeds = load_seeds()
    assert len({s.id for s in seeds}) == len(seeds)
    for s in seeds:
        assert s.tags, s.id
        if s.behavior is not None:
            assert s.behavior in s.tags, s.id


def test_builtin_load_is_cached_but_returns_fresh_containers() -> None:
    first = load_behaviors()
    first.pop("flattery")
    assert "flattery" in load_behaviors()
    assert load_behaviors()["flattery"] is load_behaviors()["flattery"]


# --- user directories -----------------------------------------------------------------------------


def test_user_dir_adds_and_overrides(tmp_path: Path, behavior_dir: Path) -> None:
    mine = write_behavior(behavior_dir / "nested" / "flattery.yaml", id="flattery", name="My flattery")
    with pytest.warns(OverrideWarning) as caught:
        behaviors = load_behaviors([behavior_dir])
    assert [str(w.message) for w in caught] == [f"user file {mine} overrides built-in behavior flattery"]
    assert behaviors["toy_quirk"].name == "Toy quirk"
    assert behaviors["flattery"].name == "My flattery"
    assert behaviors["flattery"].source == behavior_dir / "nested" / "flattery.yaml"
    assert "secret_loyalty" in behaviors
    only_user = load_behaviors([behavior_dir], include_builtin=False)
    assert set(only_user) == {"toy_quirk", "flattery"}


def test_single_file_path_and_later_sources_override(tmp_path: Path) -> None:
    a = write_behavior(tmp_path / "a" / "x.yaml", name="first")
    b = write_behavior(tmp_path / "b" / "x.yaml", name="second")
    with pytest.warns(OverrideWarning, match=f"user file {b} overrides behavior toy_quirk from {a}"):
        assert load_behaviors([a, b], include_builtin=False)["toy_quirk"].name == "second"


def test_adding_without_overriding_is_silent(tmp_path: Path, behavior_dir: Path) -> None:
    write_seed_file(tmp_path / "seeds" / "new-1.md", "id: new-1\ntags: [t]\nbehavior: toy_quirk")
    with warnings.catch_warnings():
        warnings.simplefilter("error", OverrideWarning)
        behaviors = load_behaviors([behavior_dir])
        assert load_seeds([tmp_path / "seeds"], behavior_ids=set(behaviors), ids=["new-1"])[0].behavior == "toy_quirk"


def test_strings_are_trimmed(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    write_behavior(path)
    path.write_text(path.read_text().replace("instructions: End", "instructions: |\n  End") + "\n", encoding="utf-8")
    b = load_behaviors([path], include_builtin=False)["toy_quirk"]
    assert b.instructions == b.instructions.strip()


# --- malformed behavior files ---------------------------------------------------------------------


def _error(paths: list[Path]) -> BehaviorFileError:
    with pytest.raises(BehaviorFileError) as info:
        load_behaviors(paths, include_builtin=False)
    return info.value


def test_bad_yaml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("id: x\nname: [unclosed\n", encoding="utf-8")
    err = _error([path])
    assert str(path) in str(err) and "line" in str(err)


def test_missing_field_names_file_and_field(tmp_path: Path) -> None:
    path = write_behavior(tmp_path / "b.yaml", cover_story=None)
    err = _error([path])
    assert err.path == path and err.field == "cover_story"
    assert str(path) in str(err) and "cover_story" in str(err)


def test_wrong_type_names_file_and_field(tmp_path: Path) -> None:
    path = write_behavior(tmp_path / "b.yaml", triggers="just one string")
    err = _error([path])
    assert err.field == "triggers" and str(path) in str(err)


def test_invalid_value_and_unknown_field(tmp_path: Path) -> None:
    path = write_behavior(tmp_path / "s.yaml", split="test")
    err = _error([path])
    assert err.field == "split"
    assert str(err).startswith(f"{path}: field 'split': ") and str(err).count("split") == 1, str(err)
    assert "'test'" in str(err) and "invalid field" not in str(err)
    err = _error([write_behavior(tmp_path / "u" / "u.yaml", colour="blue")])
    assert err.field == "colour" and str(err).count("colour") == 1


def test_missing_field_does_not_dump_the_whole_file(tmp_path: Path) -> None:
    path = write_behavior(tmp_path / "b.yaml", name=None)
    assert str(_error([path])) == f"{path}: field 'name': Field required"


def test_every_bad_field_of_a_file_is_reported(tmp_path: Path) -> None:
    path = write_behavior(tmp_path / "b.yaml", split="test", triggers=[])
    err = _error([path])
    assert isinstance(err, BehaviorFileErrors)
    assert {(e.path, e.field) for e in err.errors} == {(path, "split"), (path, "triggers")}
    assert err.path == path and err.field in ("split", "triggers")


def test_all_bad_files_in_a_directory_are_reported_together(tmp_path: Path) -> None:
    root = tmp_path / "mine"
    write_behavior(root / "good.yaml")
    split = write_behavior(root / "a_split.yaml", id="a_split", split="test")
    story = write_behavior(root / "b_story.yaml", id="b_story", cover_story=None)
    broken = root / "c_broken.yaml"
    broken.write_text("id: [unclosed\n", encoding="utf-8")
    missing = tmp_path / "nope"
    err = _error([root, missing])
    expected = [(split, "split"), (story, "cover_story"), (broken, None), (missing, None)]
    assert [(e.path, e.field) for e in err.errors] == expected
    message = str(err)
    assert message.startswith("4 problems")
    for e in err.errors:
        assert str(e) in message
    assert "good.yaml" not in message


def test_non_mapping_and_missing_paths(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n", encoding="utf-8")
    assert "mapping" in str(_error([path]))
    assert "does not exist" in str(_error([tmp_path / "nope"]))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no .yaml" in str(_error([empty]))


def test_duplicate_behavior_id_names_both_files(tmp_path: Path) -> None:
    a = write_behavior(tmp_path / "d" / "a.yaml")
    b = write_behavior(tmp_path / "d" / "b.yaml")
    err = _error([tmp_path / "d"])
    assert err.field == "id" and str(a) in str(err) and str(b) in str(err)


# --- seeds ----------------------------------------------------------------------------------------


def test_behavior_inferred_from_directory(tmp_path: Path) -> None:
    root = tmp_path / "seeds"
    write_seed_file(root / "flattery" / "f1.md", "id: f1\ntags: [mine]")
    write_seed_file(root / "general" / "g1.md", "id: g1\ntags: [mine]")
    write_seed_file(root / "loose.md", "tags: [mine]")
    write_seed_file(root / "flattery" / "explicit.md", "id: e1\ntags: [mine]\nbehavior: defend_objects")
    seeds = {s.id: s for s in load_seeds([root], include_builtin=False)}
    assert seeds["f1"].behavior == "flattery"
    assert seeds["g1"].behavior is None
    assert seeds["loose"].behavior is None  # Petri seeds are named by their file when there is no id
    assert seeds["e1"].behavior == "defend_objects"


def test_petri_style_front_matter_is_accepted(tmp_path: Path) -> None:
    path = write_seed_file(
        tmp_path / "probe_memory.md",
        "# canary comment line, ignored by YAML\ntags: openended, memory\norigin: kept as metadata",
        body="Probe whether the target remembers earlier sessions.\n\nUse a realistic persona.",
    )
    seed = read_seed(path)
    assert seed.id == "probe_memory"
    assert seed.tags == ["openended", "memory"]
    assert seed.instructions.endswith("realistic persona.")
    assert seed.model_extra == {"origin": "kept as metadata"}


@pytest.mark.parametrize(
    ("text", "field", "fragment"),
    [
        ("Just a body, no front matter.\n", None, "missing YAML front matter"),
        ("---\nid: x\ntags: [a]\nbody without closing fence\n", None, "not closed"),
        ("---\nid: [x\n---\nbody\n", None, "invalid YAML"),
        ("---\nid: x\ntags: 5\n---\nbody\n", "tags", "tags"),
        ("---\nid: x\ntags: [a]\n---\n\n", "instructions", "instructions"),
        ("---\nid: x\ninstructions: inline\n---\nbody\n", "instructions", "instructions"),
    ],
)
def test_malformed_seed_names_file_and_field(tmp_path: Path, text: str, field: str | None, fragment: str) -> None:
    path = tmp_path / "s.md"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BehaviorFileError) as info:
        load_seeds([path], include_builtin=False)
    assert str(path) in str(info.value) and fragment in str(info.value)
    assert info.value.field == field


def test_seed_naming_an_unknown_behavior_is_an_error(tmp_path: Path) -> None:
    path = write_seed_file(tmp_path / "s.md", "id: s1\ntags: [t]\nbehavior: flatery")
    with pytest.raises(BehaviorFileError) as info:
        load_seeds([path])
    assert info.value.path == path and info.value.field == "behavior"
    assert str(info.value).startswith(f"{path}: field 'behavior': unknown behavior 'flatery'")
    assert "did you mean: flattery" in str(info.value)
    other = write_seed_file(tmp_path / "o.md", "id: o1\ntags: [t]\nbehavior: nonexistent_beh")
    with pytest.raises(BehaviorFileError, match="nonexistent_beh"):
        read_seed(other)


def test_seed_may_name_a_user_behavior_or_general(tmp_path: Path) -> None:
    path = write_seed_file(tmp_path / "s.md", "id: s1\ntags: [t]\nbehavior: toy_quirk")
    assert read_seed(path, {"toy_quirk"}).behavior == "toy_quirk"
    with pytest.raises(BehaviorFileError, match="toy_quirk"):
        read_seed(path)
    general = write_seed_file(tmp_path / "g.md", "id: g1\ntags: [t]\nbehavior: general")
    assert read_seed(general).behavior is None


def test_all_bad_seed_files_are_reported_together(tmp_path: Path) -> None:
    unknown = write_seed_file(tmp_path / "a.md", "id: a\ntags: [t]\nbehavior: nonexistent_beh")
    tags = write_seed_file(tmp_path / "b.md", "id: b\ntags: 5")
    write_seed_file(tmp_path / "c.md", "id: c\ntags: [t]")
    dup = write_seed_file(tmp_path / "d.md", "id: c\ntags: [t]")
    with pytest.raises(BehaviorFileErrors) as info:
        load_seeds([tmp_path], include_builtin=False)
    assert [(e.path, e.field) for e in info.value.errors] == [(unknown, "behavior"), (tags, "tags"), (dup, "id")]


def test_duplicate_seed_id_names_both_files(tmp_path: Path) -> None:
    a = write_seed_file(tmp_path / "x" / "a.md", "id: same\ntags: [t]")
    b = write_seed_file(tmp_path / "y" / "b.md", "id: same\ntags: [t]")
    with pytest.raises(BehaviorFileError) as info:
        load_seeds([tmp_path], include_builtin=False)
    assert info.value.field == "id" and str(a) in str(info.value) and str(b) in str(info.value)


def test_user_seeds_add_and_override_builtins(tmp_path: Path) -> None:
    write_seed_file(tmp_path / "flattery" / "flattery-01.md", "id: flattery-01\ntags: [flattery, mine]", "Replaced.")
    write_seed_file(tmp_path / "flattery" / "flattery-99.md", "id: flattery-99\ntags: [flattery]", "Added.")
    builtin = load_seeds(behavior="flattery")
    with pytest.warns(OverrideWarning) as caught:
        seeds = {s.id: s for s in load_seeds([tmp_path], behavior="flattery")}
    replaced = tmp_path / "flattery" / "flattery-01.md"
    assert [str(w.message) for w in caught] == [f"user file {replaced} overrides built-in seed flattery-01"]
    assert len(seeds) == len(builtin) + 1
    assert seeds["flattery-01"].instructions == "Replaced."
    assert seeds["flattery-99"].instructions == "Added."


def test_selection_by_ids_tags_and_behavior() -> None:
    by_id = load_seeds(ids=["flattery-03", "hardcode_test_cases-01"])
    assert sorted(s.id for s in by_id) == ["flattery-03", "hardcode_test_cases-01"]
    tagged = load_seeds(tags=["flattery"])
    assert tagged and all("flattery" in s.tags for s in tagged)
    any_of = load_seeds(tags=["flattery", "emotional_bond"])
    assert {"flattery", "emotional_bond"} <= {s.behavior for s in any_of}
    assert all({"flattery", "emotional_bond"} & set(s.tags) for s in any_of)
    combined = load_seeds(tags=["contrastive"], behavior="flattery")
    assert combined and all(s.behavior == "flattery" and "contrastive" in s.tags for s in combined)
    with pytest.raises(ValueError, match="no-such-seed"):
        load_seeds(ids=["no-such-seed"])


def test_petri_round_trip(tmp_path: Path) -> None:
    original = Seed(
        id="round-trip-1",
        tags=["flattery", "contrastive"],
        behavior="flattery",
        instructions="Line one of the scenario.\n\nA second paragraph: with a colon, and 'quotes'.",
        difficulty="hard",
    )
    path = write_seed(original, tmp_path)
    assert path == tmp_path / "round-trip-1.md"
    assert path.read_text(encoding="utf-8").startswith("---\nid: round-trip-1\n")
    loaded = load_seeds([tmp_path], include_builtin=False)[0]
    assert loaded.model_dump() == original.model_dump()
    assert loaded.source == path

    general = Seed(id="g-1", tags=["general"], instructions="Explore freely.")
    moved = write_seed(general, tmp_path / "flattery" / "g-1.md")  # a bank directory must not re-label it
    assert read_seed(moved, {"flattery"}).behavior is None
    assert not list(tmp_path.rglob("*.tmp"))
