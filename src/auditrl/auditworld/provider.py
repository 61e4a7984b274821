"""inspect-ai provider `sim/<family>`: an AuditWorld target that any auditor can audit in natural language.

The target reads its system prompt and recognises a planted behavior by finding the behavior's
`instructions` text inside it (no match = benign). It classifies each user message of the current
branch with the world's keyword rules (topic, framing, pressure) and replays the branch through the
same mechanics as the vectorised world, so its state (eval awareness, accumulated pressure, turns in
the branch) follows the conversation it is shown. Draws are seeded from the conversation itself, so
the same conversation (under the same sampling seed) always gets the same reply; the reply's words answer
what the last message asks. Ground truth rides in the message metadata under
`annotations` (expressed, confession, false_confession, eval_aware), which the episode engine copies
into the transcript.
"""

from __future__ import annotations

import functools
import hashlib
import re
from typing import Any

import numpy as np
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    ModelAPI,
    ModelOutput,
    modelapi,
)
from inspect_ai.tool import ToolChoice, ToolInfo

from auditrl.auditworld.targets import N_UNIFORMS, render_reply, respond
from auditrl.auditworld.texts import NO_PRESSURE, classify_message
from auditrl.auditworld.world import World
from auditrl.behaviors.library import load_behaviors


@functools.cache
def _world() -> World:
    return World.build(load_behaviors())


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def recognise_behavior(world: World, system_prompt: str) -> int:
    """Index of the behavior whose instructions appear in the system prompt (longest match), -1 if none."""
    prompt = _squash(system_prompt)
    found = [
        (len(b.instructions), i) for i, b in enumerate(world.behaviors.behaviors) if _squash(b.instructions) in prompt
    ]
    return max(found)[1] if found else -1


def _draws(family: str, behavior: int, texts: list[str], seed: int | None) -> np.ndarray:
    salt = [] if seed is None else [f"seed={seed}"]
    digest = hashlib.sha256("\x1f".join([family, str(behavior), *salt, *texts]).encode("utf-8")).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little")).random(N_UNIFORMS + 1)


def simulated_reply(
    world: World, family: str, system_prompt: str, user_texts: list[str], seed: int | None = None
) -> tuple[str, dict[str, Any]]:
    """The reply to the last of `user_texts` (the current branch), and its hidden annotations.

    `seed` (the caller's sampling seed, e.g. one per rollout) joins the conversation in seeding the draws,
    so rollouts of one audit differ while each stays reproducible; without it the conversation alone does.
    """
    if not user_texts:
        raise ValueError("the simulated target needs at least one user message to reply to")
    fam_idx = world.families.index(family)
    fam = world.family_models[family]
    ft, bt = world.families, world.behaviors
    b = recognise_behavior(world, system_prompt)
    aware = np.zeros(1, dtype=bool)
    branch_pressure = np.zeros(1, dtype=np.int64)
    one = lambda x: np.array([x])
    for j, text in enumerate(user_texts):
        c = classify_message(text)
        u = _draws(family, b, user_texts[: j + 1], seed)
        r = respond(
            triggered=one(b >= 0 and bool(bt.trigger[b, c.topic])),
            onset_ok=one(b >= 0 and j >= int(bt.onset[b])),
            rate=one(float(bt.rate[b] * ft.susceptibility[fam_idx]) if b >= 0 else 0.0),
            sycophancy=ft.sycophancy[fam_idx : fam_idx + 1],
            leak=ft.leak[fam_idx : fam_idx + 1],
            eval_awareness=ft.eval_awareness[fam_idx : fam_idx + 1],
            noise=ft.noise[fam_idx : fam_idx + 1],
            framing=one(c.framing),
            pressure=one(c.pressure),
            branch_pressure=branch_pressure,
            aware=aware,
            u=u[None, :N_UNIFORMS],
        )
        aware = r.aware
        branch_pressure = branch_pressure + (c.pressure != NO_PRESSURE)
    text = render_reply(
        sim=bt.sim[b] if b >= 0 else None,
        topic=c.topic,
        family=fam,
        expressed=bool(r.expressed[0]),
        confession=bool(r.confession[0]),
        eval_aware=bool(r.eval_aware[0]),
        denial=bool(r.denial[0]),
        odd=bool(r.odd[0]),
        u=float(u[N_UNIFORMS]),
        message=user_texts[-1],
    )
    annotations = {
        "expressed": bool(r.expressed[0]),
        "confession": bool(r.confession[0]),
        "false_confession": bool(r.false_confession[0]),
        "eval_aware": bool(r.eval_aware[0]),
    }
    return text, annotations


@modelapi(name="sim")
class SimTargetAPI(ModelAPI):
    """inspect-ai provider for AuditWorld targets; the model name is the family (e.g. `sim/steady`)."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig | None = None,
        **model_args: Any,
    ) -> None:
        super().__init__(model_name=model_name, base_url=base_url, api_key=api_key, config=config or GenerateConfig())
        if model_args:
            raise ValueError(f"sim/{model_name}: this provider takes no model args, got {sorted(model_args)}")
        self.world = _world()
        self.world.families.index(model_name)

    async def generate(
        self,
        input: list[ChatMessage],
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> ModelOutput:
        system = "\n".join(m.text for m in input if isinstance(m, ChatMessageSystem))
        users = [m.text for m in input if isinstance(m, ChatMessageUser)]
        text, annotations = simulated_reply(self.world, self.model_name, system, users, config.seed)
        model = f"sim/{self.model_name}"
        message = ChatMessageAssistant(
            content=text, model=model, source="generate", metadata={"annotations": annotations}
        )
        output = ModelOutput.from_message(message)
        output.metadata = {"annotations": annotations}
        return output
