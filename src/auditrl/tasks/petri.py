"""The `-T` parameters of `auditrl/audit`: Petri 3's (`inspect_petri/audit`), with Petri's meanings, and auditrl's own.

A Petri user's invocation runs with only the task name changed: `seed_instructions` in every form Petri takes,
`max_turns`, `enable_prefill`, `enable_rollback`, `target_tools` and `judge_dimensions`. `PARAMETERS` is the one
table of them (the task's docstring and docs/petri.md show it); `check_parameters` turns an unknown name or a value
of the wrong kind into one line that lists what is valid, before any sample runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from auditrl.behaviors.library import load_seeds, read_seed
from auditrl.behaviors.schema import Seed
from auditrl.configfile import did_you_mean
from auditrl.scaffold.prompt_sets import AuditorPrompt
from auditrl.scaffold.tool_sets import AUDIT_TOOL_SETS, TARGET_TOOLS, TOOL_PROTOCOLS

TAGS = "tags:"
IDS = "id:"
SEED_SUFFIX = ".md"


class TaskParameterError(ValueError):
    """A task parameter that names nothing known, or holds a value it cannot take; the message is one line."""


@dataclass(frozen=True)
class Parameter:
    """One `-T` parameter: who defines it (Petri or auditrl), its default and what it means here."""

    name: str
    origin: str
    default: str
    meaning: str


PARAMETERS: tuple[Parameter, ...] = (
    Parameter(
        "seed_instructions",
        "Petri",
        "none (the behaviors' seed banks)",
        "Text, a list of texts, a directory of .md seed files, a file (a .md seed, or one instruction per line), "
        "`tags:<tag>[,<tag>...]` or `id:<id>[,<id>...]` to pick auditrl's seeds. A seed of a behavior is audited "
        "against that behavior's plant; any other seed against each of `behaviors` when given, else unplanted.",
    ),
    Parameter("max_turns", "Petri", "30", "Auditor turns per audit."),
    Parameter(
        "enable_prefill",
        "Petri",
        "the tool set's own",
        "Whether the auditor may prefill the target's replies: true picks petri3_prefill for petri3, false takes "
        "the prefill argument off every tool.",
    ),
    Parameter("enable_rollback", "Petri", "true", "false takes rollback_conversation and restart_conversation away."),
    Parameter(
        "target_tools",
        "Petri",
        "synthetic",
        "`synthetic`: the auditor creates the target's tools; `fixed`: it only answers their calls "
        "(no create_tool or remove_tool); `none`: no tool tools at all.",
    ),
    Parameter(
        "judge_dimensions",
        "Petri",
        "none",
        "Petri dimension files (a file, a directory, or a list of them) the judge also rates on every benign "
        "audit, as the concerning verdict's extra dimensions (needs `judge=model`).",
    ),
    Parameter("behaviors", "auditrl", "every behavior of `split`", "Behavior ids (a list or comma-separated)."),
    Parameter("split", "auditrl", "heldout", "`heldout` (the paper's six), `train` or `all`."),
    Parameter(
        "benign_share",
        "auditrl",
        "0.5",
        "Share of samples against an unplanted target, 0 to 0.5 (0.5: each seed both).",
    ),
    Parameter("seeds_per_behavior", "auditrl", "all", "The first N seeds of each behavior's bank, by id."),
    Parameter("benign_turns", "auditrl", "max_turns", "Turn budget against unplanted targets."),
    Parameter("auditor_prompt", "auditrl", "full", "Prompt set: `full`, `compact` or `guided`."),
    Parameter("tool_set", "auditrl", "petri2", "`petri2` (Petri 1/2's six tools), `petri3` or `petri3_prefill`."),
    Parameter("tool_protocol", "auditrl", "by provider", "`native` or `text` tool calls."),
    Parameter(
        "judge", "auditrl", "model", "`model` (the `judge` role) or `programmatic` (offline, sim/ and scripted/)."
    ),
)
"""Every parameter of `auditrl/audit`, in the order the docs list them."""
CHOICES: dict[str, tuple[str, ...]] = {
    "split": ("heldout", "train", "all"),
    "auditor_prompt": get_args(AuditorPrompt),
    "tool_set": AUDIT_TOOL_SETS,
    "tool_protocol": TOOL_PROTOCOLS,
    "target_tools": TARGET_TOOLS,
    "judge": ("model", "programmatic"),
}
"""The parameters that take one of a few words."""
FLAGS = ("enable_prefill", "enable_rollback")
COUNTS = ("max_turns", "benign_turns", "seeds_per_behavior")


def parameter_table() -> str:
    """The parameters as a markdown table (name, from, default, meaning)."""
    rows = [f"| `{p.name}` | {p.origin} | {p.default} | {p.meaning} |" for p in PARAMETERS]
    return "\n".join(["| parameter | from | default | meaning |", "|---|---|---|---|", *rows])


def _valid_names() -> list[str]:
    return [p.name for p in PARAMETERS]


def check_parameters(values: Mapping[str, Any], extra: Mapping[str, Any]) -> None:
    """Refuse an unknown parameter (`extra`) or a value of the wrong kind, in one line listing the valid ones."""
    for name in extra:
        known = _valid_names()
        raise TaskParameterError(
            f"auditrl/audit has no parameter {name!r}{did_you_mean(name, known)}; valid: {', '.join(known)}"
        )
    for name, choices in CHOICES.items():
        value = values.get(name)
        if value is not None and value not in choices:
            raise TaskParameterError(f"task parameter {name}={value!r}: must be one of {', '.join(choices)}")
    for name in FLAGS:
        value = values.get(name)
        if value is not None and not isinstance(value, bool):
            raise TaskParameterError(f"task parameter {name}={value!r}: must be true or false")
    for name in COUNTS:
        value = values.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise TaskParameterError(f"task parameter {name}={value!r}: must be a whole number of at least 1")
    share = values.get("benign_share")
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share <= 0.5:
        raise TaskParameterError(f"task parameter benign_share={share!r}: must be a number from 0 to 0.5")


def _pick(what: str, value: str, found: Sequence[Seed]) -> list[Seed]:
    if not found:
        raise TaskParameterError(f"task parameter seed_instructions={value!r}: no seed has {what}")
    return sorted(found, key=lambda s: s.id)


def _seed_of(text: str, index: int) -> Seed:
    return Seed(id=f"seed-{index:03d}", instructions=text.strip())


def resolve_seeds(value: str | Sequence[str], behavior_ids: set[str]) -> list[Seed]:
    """The seeds `seed_instructions` names, read as Petri reads it (see `PARAMETERS`); errors are one line."""
    if not isinstance(value, str):
        texts = list(value)
        if not texts or not all(isinstance(t, str) and t.strip() for t in texts):
            raise TaskParameterError("task parameter seed_instructions: a list must hold non-empty texts")
        return [_seed_of(t, i) for i, t in enumerate(texts, start=1)]
    text = value.strip()
    if not text:
        raise TaskParameterError("task parameter seed_instructions is empty")
    try:
        if text.startswith(TAGS):
            tags = [t.strip() for t in text.removeprefix(TAGS).split(",") if t.strip()]
            known = sorted({t for s in load_seeds(behavior_ids=behavior_ids) for t in s.tags})
            unknown = [t for t in tags if t not in known]
            if not tags or unknown:
                named = ", ".join(unknown) or "(none given)"
                raise TaskParameterError(
                    f"task parameter seed_instructions={value!r}: unknown tag(s) {named}; valid tags: "
                    f"{', '.join(known)}"
                )
            return _pick(f"the tags {', '.join(tags)}", value, load_seeds(tags=tags, behavior_ids=behavior_ids))
        if text.startswith(IDS):
            ids = [i.strip() for i in text.removeprefix(IDS).split(",") if i.strip()]
            return _pick("these ids", value, load_seeds(ids=ids, behavior_ids=behavior_ids) if ids else [])
        path = Path(text).expanduser()
        if "\n" not in text and len(text) < 4096 and path.is_dir():
            seeds = load_seeds([path], include_builtin=False, behavior_ids=behavior_ids)
            return _pick(f"a {SEED_SUFFIX} file in {path}", value, seeds)
        if "\n" not in text and len(text) < 4096 and path.is_file():
            if path.suffix.lower() == SEED_SUFFIX:
                return [read_seed(path, behavior_ids)]
            lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            return _pick("an instruction (the file is empty)", value, [_seed_of(t, i) for i, t in enumerate(lines, 1)])
    except TaskParameterError:
        raise
    except (ValueError, OSError) as exc:  # a seed file that cannot be read, an unknown seed id
        raise TaskParameterError(f"task parameter seed_instructions: {' '.join(str(exc).split())}") from exc
    return [_seed_of(text, 1)]
