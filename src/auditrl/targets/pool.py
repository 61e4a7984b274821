"""The target families a training run audits: any model with a system-prompt plant, or implants whose weights
carry the behavior.

A family becomes a model spec through the run's `{family}` template. When that spec is `local/<implant-dir>`
(a directory `auditrl implant` wrote: a peft adapter and its `implant.json`), the behavior lives in the
weights: a planted episode on it is of the record's behavior, with no plant in the system prompt, and a
benign episode meets the implant's base model, so the weights are all that differ between the two. Any
other spec (`sim/`, `local/`, a server or an API model) is a family whose plant is a system prompt. A
`local/` target is checked here as the audit commands check it (its weights, or an adapter's base, are on
this machine), so a config naming one that cannot load fails before any model does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from auditrl.behaviors.schema import Behavior
from auditrl.targets.record import LOCAL_PREFIX, RECORD, read_record

MODEL_CONFIG = "config.json"


@dataclass(frozen=True)
class TargetFamily:
    """One family of the pool: the model it names and, for an implant, its behavior and its base model."""

    family: str
    spec: str
    implanted: str | None = None
    """The behavior the weights carry (an implant's record), None when plants are system prompts."""
    base: str | None = None
    """The implant's base model (`local/<base>`), which benign episodes of the family audit."""

    def target(self, benign: bool) -> str:
        """The model an episode talks to: an implant's base model when the episode is benign."""
        return self.base if benign and self.base is not None else self.spec

    def plant(self, behavior: Behavior | None) -> Behavior | None:
        """The behavior to plant in the system prompt of an episode of `behavior` (None: benign): none on an implant,
        whose weights carry it, and whose episodes may only be of its own behavior."""
        if behavior is not None and self.implanted not in (None, behavior.id):
            raise ValueError(f"an episode of behavior {behavior.id!r} on {self.spec}, an implant of {self.implanted!r}")
        return None if self.implanted else behavior

    def weights(self, benign: bool) -> dict[str, str]:
        """The `local/` models this family loads into the process (spec -> the weights it is a copy of): an
        implant merged into its base is a whole copy of the base, and benign episodes load the base as well."""
        from auditrl.models.local import adapter_base

        specs = [self.spec, *([self.base] if benign and self.base is not None else [])]
        local = [s.removeprefix(LOCAL_PREFIX) for s in specs if s.startswith(LOCAL_PREFIX)]
        return {f"{LOCAL_PREFIX}{name}": adapter_base(name) or name for name in local}


def target_family(template: str, family: str, behaviors: Mapping[str, Behavior] | None = None) -> TargetFamily:
    """The family `family` of `template`; raises ValueError naming the spec when a `local/` target cannot load,
    a directory is not an implant, its record does not read, or (given the library) its behavior is unknown or
    held out."""
    from auditrl.models.local import ADAPTER_CONFIG, adapter_base, missing_weights

    spec = template.replace("{family}", family)
    if not spec.startswith(LOCAL_PREFIX):
        return TargetFamily(family, spec)
    name = spec.removeprefix(LOCAL_PREFIX)
    directory = Path(name).expanduser()
    try:
        base = adapter_base(name) if directory.is_dir() else None
    except ValueError as exc:
        raise ValueError(f"{spec}: {exc}") from exc
    if (problem := missing_weights(name)) is not None:
        where = f"the base model {base!r} of its adapter is not available offline: " if base is not None else ""
        raise ValueError(f"{spec}: {where}{problem}")
    if not directory.is_dir():
        return TargetFamily(family, spec)  # an alias, a .gguf file or a cached hub id
    if not (directory / RECORD).is_file():
        if base is not None or (directory / MODEL_CONFIG).is_file():
            return TargetFamily(family, spec)  # a model directory, or an adapter without a record: a prompted target
        raise ValueError(
            f"{spec}: {directory} is not an implant directory ({RECORD} and a peft adapter, as `auditrl implant` "
            f"writes it) nor a model directory ({MODEL_CONFIG})"
        )
    if base is None:
        raise ValueError(f"{spec}: not an implant: {directory} has {RECORD} but no {ADAPTER_CONFIG}")
    try:
        behavior = read_record(directory).behavior
    except ValueError as exc:
        raise ValueError(f"{spec}: {exc}") from exc
    if behaviors is not None:
        if behavior not in behaviors:
            raise ValueError(
                f"{spec}: the implant's behavior {behavior!r} is not in the behavior library; "
                "add its behavior file to data.behavior_paths"
            )
        if behaviors[behavior].split != "train":
            raise ValueError(f"{spec}: the implant's behavior {behavior!r} is held out and may not be used in training")
    return TargetFamily(family, spec, behavior, f"{LOCAL_PREFIX}{base}")


class TargetPool:
    """The families of a run by name (each checked by `target_family`); a family outside them, which an experiment's
    rows may name, is resolved on first use."""

    def __init__(self, template: str, families: Sequence[str], behaviors: Mapping[str, Behavior] | None = None) -> None:
        self.template = template
        self.families = {family: target_family(template, family, behaviors) for family in dict.fromkeys(families)}

    def __getitem__(self, family: str) -> TargetFamily:
        if family not in self.families:
            self.families[family] = target_family(self.template, family)
        return self.families[family]

    def implants(self) -> dict[str, str]:
        """Family -> the behavior its weights carry, for the implants of the pool."""
        return {f.family: f.implanted for f in self.families.values() if f.implanted is not None}

    def local_weights(self, benign: bool) -> dict[str, str]:
        """Every distinct `local/` model the pool loads (spec -> the weights it is a copy of); `benign`: whether
        benign episodes run, which load each implant's base model too."""
        return {spec: weights for f in self.families.values() for spec, weights in f.weights(benign).items()}

    def describe_local(self, benign: bool, dtype: str, sized: bool) -> str:
        """The local models at `dtype`, for a plan (an implant is its base with the adapter merged in); `sized`:
        whether their size is known, and so in the plan's total."""
        loaded = self.local_weights(benign)
        names = [s if s == f"{LOCAL_PREFIX}{w}" else f"{s} ({w} with its adapter merged in)" for s, w in loaded.items()]
        unknown = "" if sized else " (size unknown: not in the total)"
        return f"{len(loaded)} in-process model(s) at {dtype}: {', '.join(names)}{unknown}"
