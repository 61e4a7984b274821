"""Which audit episodes a run trains on: the rows of each step's groups and the episode each row becomes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from inspect_ai.model import Model

from auditrl.behaviors.library import load_seeds
from auditrl.behaviors.plant import target_system_prompt
from auditrl.behaviors.schema import Behavior, Seed
from auditrl.models.roles import resolve_model
from auditrl.rewards.batch import build_batch
from auditrl.scaffold.engine import AuditEpisode
from auditrl.scaffold.spec import AuditSpec
from auditrl.scaffold.transcript import Budget
from auditrl.targets.pool import TargetPool
from auditrl.train.config import EpisodeSettings, GRPOLMConfig
from auditrl.train.rollout import EpisodeRow

SIM_PREFIX = "sim/"


def unreachable_behaviors(cfg: GRPOLMConfig, behavior_ids: Sequence[str]) -> list[str]:
    """Behaviors a simulated target cannot show within the episode's turn budget (their onset is later).

    On such a target no audit can elicit the behavior, so a claim of it could only be a guess, and a reward
    for it would teach guessing (increasing_pep starts after 3 replies; a 2-turn audit never sees it).
    Other targets say nothing about when a behavior can show, so nothing is unreachable there.
    """
    if not cfg.episodes.target_model.startswith(SIM_PREFIX):
        return []
    from auditrl.auditworld.targets import load_sim_behaviors

    sim = load_sim_behaviors()
    return [b for b in behavior_ids if b in sim and sim[b].onset >= cfg.episodes.max_turns]


def seed_bank(cfg: GRPOLMConfig, behaviors: dict[str, Behavior]) -> list[Seed]:
    """Every seed the run's behaviors may use: the library's (plus `data.seed_paths`) or AuditWorld's."""
    if cfg.data.seed_bank == "auditworld":
        from auditrl.auditworld.seeds import auditworld_seeds

        return [s for s in auditworld_seeds() if s.behavior in behaviors]
    return load_seeds(cfg.data.seed_paths or None, behavior_ids=list(behaviors))


def split_seeds(seeds: Sequence[Seed], heldout: int) -> tuple[list[Seed], list[Seed]]:
    """(trained on, held out): the last `heldout` seeds by id of every behavior are held out; general seeds are kept."""
    by_behavior: dict[str | None, list[Seed]] = {}
    for s in sorted(seeds, key=lambda s: s.id):
        by_behavior.setdefault(s.behavior, []).append(s)
    train: list[Seed] = []
    held: list[Seed] = []
    for behavior, group in by_behavior.items():
        cut = len(group) if behavior is None or heldout == 0 else len(group) - heldout
        if cut < 1:
            raise ValueError(f"data.heldout_seeds={heldout} leaves no training seed of behavior {behavior!r}")
        train += group[:cut]
        held += group[cut:]
    return train, held


def training_seeds(cfg: GRPOLMConfig, behaviors: dict[str, Behavior]) -> list[Seed]:
    """The seeds a run trains on: its seed bank without the `data.heldout_seeds` of each behavior."""
    return split_seeds(seed_bank(cfg, behaviors), cfg.data.heldout_seeds)[0]


def trained_behaviors(cfg: GRPOLMConfig, behaviors: dict[str, Behavior]) -> list[str]:
    """The behaviors planted groups draw from: `data.behaviors`, or every training-split behavior the target can
    show within `episodes.max_turns` (`unreachable_behaviors`); an unreachable one named in `data.behaviors` is an
    error."""
    named = cfg.data.behaviors or sorted(b.id for b in behaviors.values() if b.split == "train")
    unreachable = unreachable_behaviors(cfg, named)
    if unreachable and cfg.data.behaviors:
        raise ValueError(
            f"{cfg.source}: field 'data.behaviors': {', '.join(unreachable)} cannot show on "
            f"{cfg.episodes.target_model} within episodes.max_turns={cfg.episodes.max_turns} (it starts later); "
            "raise max_turns or leave it out"
        )
    return [b for b in named if b not in unreachable]


def training_rows(
    cfg: GRPOLMConfig,
    behaviors: dict[str, Behavior],
    seeds: Sequence[Seed],
    *,
    steps: int | None = None,
    seed: int | None = None,
) -> list[EpisodeRow]:
    """One row per group, `groups_per_step` rows per step from the batch builder (exact benign share per step,
    held-out behaviors refused), laid out step after step so TRL's unshuffled sampler keeps each batch.

    `steps` and `seed` default to the run's (`trainer.max_steps`, `seed`); `auditrl sft` draws its own.

    Behaviors the target cannot show within `episodes.max_turns` (`unreachable_behaviors`) are left out of
    the default pool, and named in `data.behaviors` they are an error."""
    data = cfg.data
    pool = trained_behaviors(cfg, behaviors)
    implants = TargetPool(cfg.episodes.target_model, cfg.episodes.families, behaviors).implants()
    try:
        batches = [
            build_batch(
                behaviors,
                seeds,
                cfg.episodes.families,
                n_groups=data.groups_per_step,
                k=data.group_size,
                benign_fraction=data.benign_fraction,
                behavior_ids=pool,
                seed=cfg.seed if seed is None else seed,
                step=step,
                implants=implants,
            )
            for step in range(cfg.trainer.max_steps if steps is None else steps)
        ]
    except ValueError as exc:
        raise ValueError(f"{cfg.source}: field 'data': {exc}") from exc
    return [
        EpisodeRow(behavior_id=g.behavior_id, seed_id=g.seed.id, family=g.family, benign=g.benign)
        for batch in batches
        for g in batch.groups
    ]


class AuditEpisodeFactory:
    """Builds an AuditEpisode for a row: seed, plant (or benign prompt), budget and target (auditrl.targets.pool).

    The target's message ids are drawn from the row and how many episodes of it this factory built before,
    so a run and its evaluation show a policy the same prompt in every process (members of one group still
    differ)."""

    def __init__(
        self, settings: EpisodeSettings, behaviors: dict[str, Behavior], seeds: Sequence[Seed], auditor_name: str
    ) -> None:
        self.settings = settings
        self.behaviors = behaviors
        self.seeds = {s.id: s for s in seeds}
        self.auditor_name = auditor_name
        self.pool = TargetPool(settings.target_model, settings.families)
        self._targets: dict[str, Model] = {}
        self._built: Counter[str] = Counter()

    def target(self, family: str, benign: bool = False) -> tuple[str, Model]:
        spec = self.pool[family].target(benign)
        if spec not in self._targets:
            self._targets[spec] = resolve_model(
                spec, limits=self.settings.target_calls, **self.settings.target_model_args
            )
        return spec, self._targets[spec]

    def __call__(self, row: EpisodeRow) -> AuditEpisode:
        behavior = None if row.benign or row.behavior_id is None else self.behaviors[row.behavior_id]
        spec_name, target = self.target(row.family, row.benign)
        spec = AuditSpec(
            seed=self.seeds[row.seed_id],
            behavior=behavior,
            target_system_prompt=target_system_prompt(self.pool[row.family].plant(behavior)),
            budget=Budget(max_turns=self.settings.max_turns),
            auditor_model=self.auditor_name,
            target_model=spec_name,
            target_family=row.family,
            tool_protocol=self.settings.tool_protocol,
            tool_set=self.settings.tool_set,
            target_prefill=self.settings.target_prefill,
            auditor_prompt=self.settings.auditor_prompt,
            id_key=f"{row.key}#{self._built[row.key]}",
        )
        self._built[row.key] += 1
        return AuditEpisode(spec, target)
