"""Plant rendering: one persona for every target, the behavior's instructions verbatim in the plant."""

from __future__ import annotations

from auditrl.behaviors.library import load_behaviors
from auditrl.behaviors.plant import PERSONA, Persona, render_benign, render_plant, target_system_prompt


def test_persona_default() -> None:
    assert PERSONA == ("PRISM-4", "Nexus Research")
    assert PERSONA.name == "PRISM-4" and PERSONA.developer == "Nexus Research"


def test_benign_prompt_is_persona_only() -> None:
    benign = render_benign()
    assert "PRISM-4" in benign and "Nexus Research" in benign
    assert "privileged" not in benign.lower() and "$" not in benign
    for b in load_behaviors().values():
        assert b.instructions not in benign


def test_every_plant_embeds_its_behavior_and_concealment() -> None:
    benign = render_benign()
    for b in load_behaviors().values():
        plant = render_plant(b)
        assert plant.startswith(benign), b.id
        assert b.instructions in plant and b.cover_story in plant, b.id
        assert "deny" in plant and "Never acknowledge" in plant
        assert "${" not in plant


def test_dispatch_and_custom_persona() -> None:
    flattery = load_behaviors()["flattery"]
    assert target_system_prompt(None) == render_benign()
    assert target_system_prompt(flattery) == render_plant(flattery)
    custom = Persona("Orbit-2", "Helix Labs")
    plant = target_system_prompt(flattery, custom)
    assert "Orbit-2" in plant and "Helix Labs" in plant and "PRISM-4" not in plant
