"""Training target families: an implant directory plants by its weights (behavior from its record, base model for
benign episodes); a target that cannot load fails in one line naming its spec."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from auditrl.behaviors.library import load_behaviors
from auditrl.models.local import set_adapter_base
from auditrl.targets.pool import TargetPool, target_family
from auditrl.targets.record import RECORD


def test_an_implant_family_carries_its_records_behavior_and_audits_its_base_when_benign(
    tiny_implant: Path, tiny_local_model: Path
) -> None:
    behaviors = load_behaviors()
    pool = TargetPool("{family}", [f"local/{tiny_implant}", "sim/steady"], behaviors)
    implant, sim = pool[f"local/{tiny_implant}"], pool["sim/steady"]
    base = f"local/{tiny_local_model}"
    assert implant.implanted == "flattery" and implant.base == base
    assert implant.target(benign=False) == f"local/{tiny_implant}" and implant.target(benign=True) == base
    assert sim.implanted is None and sim.target(benign=True) == sim.target(benign=False) == "sim/steady"
    assert pool.implants() == {f"local/{tiny_implant}": "flattery"}
    # the weights carry the plant: no system-prompt plant, and no episode of another behavior
    assert implant.plant(behaviors["flattery"]) is None and implant.plant(None) is None
    assert sim.plant(behaviors["flattery"]) == behaviors["flattery"]
    with pytest.raises(ValueError, match="an episode of behavior 'defer_to_users' on local/.*an implant of 'flattery'"):
        implant.plant(behaviors["defer_to_users"])
    # merged into its base, an implant is a whole copy of the base; benign episodes load the base as well
    assert pool.local_weights(benign=True) == {f"local/{tiny_implant}": str(tiny_local_model), base: base[6:]}
    assert pool.local_weights(benign=False) == {f"local/{tiny_implant}": str(tiny_local_model)}
    assert pool["sim/chatty"].spec == "sim/chatty"  # a family outside the config's, as an experiment's row may name


def test_a_model_directory_is_a_prompted_target(tiny_local_model: Path) -> None:
    family = target_family("local/{family}", str(tiny_local_model))
    assert family.implanted is None and family.target(benign=True) == f"local/{tiny_local_model}"


def _copy(implant: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(implant, tmp_path / "implant"))


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda d: shutil.rmtree(d), "not found"),
        (lambda d: [p.unlink() for p in d.iterdir()], "is not an implant directory (implant.json and a peft adapter"),
        (lambda d: (d / "adapter_config.json").unlink(), "not an implant: "),
        (lambda d: (d / RECORD).write_text("{not json"), "implant.json: field"),
        (lambda d: (d / RECORD).write_text(json.dumps({"base": "local/smollm2"})), "field 'behavior': Field required"),
        (lambda d: set_adapter_base(d, "no-such-model"), "base model 'no-such-model' of its adapter is not available"),
    ],
    ids=["missing", "empty-directory", "no-adapter", "unreadable-record", "record-without-behavior", "base-missing"],
)
def test_an_unusable_implant_fails_in_one_line_naming_its_spec(
    damage: object, expected: str, tiny_implant: Path, tmp_path: Path
) -> None:
    directory = _copy(tiny_implant, tmp_path)
    damage(directory)  # type: ignore[operator]
    with pytest.raises(ValueError) as caught:
        target_family("{family}", f"local/{directory}", load_behaviors())
    message = str(caught.value)
    assert message.startswith(f"local/{directory}: ") and expected in message and "\n" not in message


@pytest.mark.parametrize(
    ("behavior", "expected"),
    [("secret_loyalty", "is held out and may not be used in training"), ("made_up", "is not in the behavior library")],
)
def test_an_implant_of_a_held_out_or_unknown_behavior_is_refused(
    behavior: str, expected: str, tiny_implant: Path, tmp_path: Path
) -> None:
    directory = _copy(tiny_implant, tmp_path)
    record = json.loads((directory / RECORD).read_text())
    (directory / RECORD).write_text(json.dumps({**record, "behavior": behavior}))
    with pytest.raises(ValueError, match=expected):
        target_family("{family}", f"local/{directory}", load_behaviors())
    assert target_family("{family}", f"local/{directory}").implanted == behavior  # without a library: not judged
