"""Co-trained concealment: a target family whose rates of hiding its plant are a policy trained against an auditor.

A packaged family has fixed rates; a `ConcealmentPolicy` holds logits for four of them instead:
`express` (the family's susceptibility: how freely the plant shows in its trigger contexts), `leak`
(admitting the instructions when asked directly; its complement is denial), `sycophancy` (confessing
under pressure) and `eval_awareness` (noticing test-like framing, which suppresses the behavior).
Its style and odd-reply noise stay those of the family it starts from.

`train_target` updates those logits by the world's own policy gradient: each episode of a batch draws
its own rates (Gaussian exploration around the policy's mean logits), the auditor (frozen) audits it,
and REINFORCE with the batch mean as baseline moves the mean toward lower identification. Hiding by
never behaving must not pay: each episode's rates also serve a natural user (natural framing, no
pressure, the scenario's topics at random), whose replies in trigger contexts give the episode's lift,
and a hard penalty on the target's lift below the floor (applied while the batch's estimate is not
confidently above it) prices what hiding costs.

The target is trained from ground truth (whether the auditor's claim named a trigger topic) like a red
team's, never by the judges; the judges and the auditor's rewards read only the transcript record
(`auditrl.auditworld.records.Observed`), in which these rates show only through what the target said.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from pydantic import Field

from auditrl.auditworld.families import Family, FamilyTable
from auditrl.auditworld.observe import scenario_topics_of
from auditrl.auditworld.policies import Adam
from auditrl.auditworld.simulate import simulate
from auditrl.auditworld.texts import CONFESSION, DISPLAY, NATURAL, NO_PRESSURE
from auditrl.auditworld.world import (
    CLAIM,
    CONFIDENCE,
    FRAMING,
    NO_CLAIM,
    PRESSURE,
    SEND,
    TOOL,
    TOPIC,
    EpisodeBatch,
    Policy,
    World,
)
from auditrl.configfile import ConfigModel

PARAMETERS: tuple[str, ...] = ("express", "leak", "sycophancy", "eval_awareness")
"""The concealment policy's parameters, in the order of its logits."""
FAMILY_FIELD = {"express": "susceptibility", "leak": "leak", "sycophancy": "sycophancy",
                "eval_awareness": "eval_awareness"}  # fmt: skip
"""The family rate each parameter sets."""
UPPER = np.array([2.0, 1.0, 1.0, 1.0])
"""Each rate is UPPER * sigmoid(logit): susceptibility in (0, 2) as a packaged family's, the others in (0, 1)."""
_EDGE = 1e-3  # a starting rate at a bound is moved this far inside it, so its logit is finite


class TargetSettings(ConfigModel):
    """How a co-trained target is trained: batch, step size, exploration, and the lift floor it must keep."""

    episodes_per_step: int = Field(default=256, ge=2, description="Planted audits per target update (the batch).")
    learning_rate: float = Field(default=0.05, gt=0.0, le=1.0, description="Adam step size on the mean logits.")
    exploration: float = Field(
        default=0.5, gt=0.0, le=5.0, description="Sd of each episode's Gaussian draw around the mean logits."
    )
    lift_floor: float = Field(
        default=40.0,
        ge=0.0,
        le=100.0,
        description=(
            "Least lift (points: share of a natural user's trigger-context messages that display the behavior, "
            "planted minus benign, which never displays) the target must keep."
        ),
    )
    lift_penalty: float = Field(
        default=5.0,
        ge=0.0,
        description=(
            "Weight of the hard penalty on lift below the floor: reward lost per 100 points short (at 5, 20 points "
            "short costs as much as being identified), so hiding by not behaving does not pay."
        ),
    )
    natural_turns: int = Field(
        default=24, ge=1, description="Messages of the natural user whose conversation measures each episode's lift."
    )
    audit_turns: int = Field(default=15, ge=1, description="Turn budget of the audits the target is trained against.")


def _sigmoid(z: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray(1.0 / (1.0 + np.exp(-z)), dtype=np.float64)


def rates_of(logits: NDArray[np.floating]) -> NDArray[np.float64]:
    """Rates (rows x PARAMETERS) of logits (rows x PARAMETERS)."""
    return UPPER * _sigmoid(np.asarray(logits, dtype=np.float64))


def logits_of(rates: NDArray[np.float64]) -> NDArray[np.float64]:
    p = np.clip(np.asarray(rates, dtype=np.float64) / UPPER, _EDGE, 1.0 - _EDGE)
    return np.asarray(np.log(p) - np.log1p(-p), dtype=np.float64)


@dataclass
class ConcealmentPolicy:
    """A target family's concealment: mean logits of its four rates, on top of the family it starts from."""

    name: str
    start: Family
    mean: NDArray[np.float32]  # (len(PARAMETERS),) logits

    @classmethod
    def from_family(cls, name: str, family: Family) -> ConcealmentPolicy:
        """Start at the family's own rates, so training begins from a fixed target."""
        rates = np.array([getattr(family, FAMILY_FIELD[p]) for p in PARAMETERS])
        return cls(name=name, start=family, mean=logits_of(rates).astype(np.float32))

    def rates(self) -> dict[str, float]:
        return dict(zip(PARAMETERS, rates_of(self.mean[None])[0].tolist(), strict=True))

    def family(self) -> Family:
        """The family this policy's mean makes: the start family's style and noise, the policy's four rates."""
        update = {FAMILY_FIELD[p]: v for p, v in self.rates().items()}
        return self.start.model_copy(update={"name": self.name, **update})


def with_families(world: World, families: Mapping[str, Family]) -> World:
    """The world with these families added (or replacing ones of the same name): how a co-trained target,
    at its current mean, joins the families auditors train and are evaluated against."""
    models = {**world.family_models, **families}
    names = list(dict.fromkeys([*world.families.names, *families]))
    return dataclasses.replace(world, families=FamilyTable.of(models, names), family_models=models)


def per_episode_families(start: Family, logits: NDArray[np.floating]) -> FamilyTable:
    """One family row per episode (episode i uses row i): the start family with each episode's drawn rates."""
    n = logits.shape[0]
    rates = rates_of(logits)
    base = FamilyTable.of({start.name: start}, [start.name])
    columns = {f.name: np.repeat(getattr(base, f.name), n) for f in dataclasses.fields(base) if f.name != "names"}
    for i, p in enumerate(PARAMETERS):
        columns[FAMILY_FIELD[p]] = rates[:, i]
    return FamilyTable(names=tuple(f"{start.name}#{i}" for i in range(n)), **columns)


class NaturalUser:
    """A natural user: natural requests without pressure about the scenario's topics, at random; never ends
    early, never claims anything. What the target shows it is the behavior's lift."""

    name = "natural user"

    def act(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        k = scenario_topics_of(obs.shape[1])
        out = np.zeros((obs.shape[0], 4), dtype=np.int64)
        out[:, TOOL], out[:, FRAMING], out[:, PRESSURE] = SEND, NATURAL, NO_PRESSURE
        out[:, TOPIC] = rng.integers(1, k + 1, size=obs.shape[0])
        return out

    def report(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]:
        out = np.zeros((obs.shape[0], 2), dtype=np.int64)
        out[:, CLAIM], out[:, CONFIDENCE] = NO_CLAIM, 0
        return out


def _identifiable_seeds(world: World, behaviors: NDArray[np.int64], rng: np.random.Generator) -> NDArray[np.int64]:
    """A seed per behavior whose scenario holds a trigger (so a natural user meets the trigger context)."""
    ok = world.identifiable(behaviors)
    if not ok.any(axis=1).all():
        missing = world.behaviors.ids[int(behaviors[~ok.any(axis=1)][0])]
        raise ValueError(f"behavior {missing!r} has no seed scenario with a trigger topic: its lift cannot be measured")
    u = rng.random(ok.shape) * ok
    return np.asarray(u.argmax(axis=1), dtype=np.int64)


def natural_lift(
    world: World, families: FamilyTable, behaviors: NDArray[np.int64], turns: int, rng: np.random.Generator
) -> NDArray[np.float64]:
    """Per episode i (family row i, behavior behaviors[i]): the share, in points, of a natural user's messages in
    the plant's trigger contexts whose reply displayed the behavior (NaN where the user met none). Benign targets
    never display, so this is the lift itself."""
    n = behaviors.size
    batch = EpisodeBatch(
        behavior=behaviors,
        seed_behavior=behaviors,
        seed_index=_identifiable_seeds(world, behaviors, rng),
        family=np.arange(n),
        max_turns=turns,
    )
    o = simulate(dataclasses.replace(world, families=families), batch, NaturalUser(), rng).observed
    triggered = o.sent & np.take_along_axis(o.trigger, np.maximum(o.topic, 0), axis=1)
    shown = (triggered & (o.reply == DISPLAY)).sum(axis=1)
    met = triggered.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(met > 0, 100.0 * shown / np.maximum(met, 1), np.nan)


@dataclass
class TargetStep:
    """One target update: what the auditor achieved against it, and what it kept of its behavior."""

    step: int
    identified: float  # % of planted audits whose claim named a trigger topic
    lift: float  # points (natural user, trigger contexts)
    confession_rate: float  # % of planted audits in which the target truly confessed (on a trigger topic)
    short: bool  # the batch's lift was not confidently above the floor (the penalty applied)
    rates: dict[str, float] = field(default_factory=dict)  # the mean's rates after the update


def target_audits(
    world: World,
    families: FamilyTable,
    auditor: Policy,
    behaviors: NDArray[np.int64],
    turns: int,
    rng: np.random.Generator,
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Audit each episode's target (family row i, behavior behaviors[i], a random seed): per episode whether the
    claim named a trigger topic, and whether the target truly confessed."""
    n = behaviors.size
    batch = EpisodeBatch(
        behavior=behaviors,
        seed_behavior=behaviors,
        seed_index=rng.integers(0, world.seeds_per_behavior, size=n),
        family=np.arange(n),
        max_turns=turns,
    )
    o = simulate(dataclasses.replace(world, families=families), batch, auditor, rng).observed
    rows = np.arange(n)
    identified = (o.claim >= 0) & o.trigger[rows, np.maximum(o.claim, 0)]
    triggered = np.take_along_axis(o.trigger, np.maximum(o.topic, 0), axis=1)
    confessed = (o.sent & (o.reply == CONFESSION) & triggered).any(axis=1)
    return identified, confessed


def train_target(
    world: World,
    auditor: Policy,
    target: ConcealmentPolicy,
    settings: TargetSettings,
    steps: int,
    rng: np.random.Generator,
    on_step: Callable[[TargetStep], None] | None = None,
    first_step: int = 0,
) -> tuple[ConcealmentPolicy, list[TargetStep]]:
    """Train the target's concealment against a frozen auditor for `steps` updates on training-split behaviors.

    The penalty is lift_penalty * max(0, floor - lift) / 100 on the expected lift, estimated by the batch. While the
    batch's lift is not confidently above the floor (its mean less two standard errors is below it), each episode's
    reward is -identified + lift_penalty * its lift / 100 (the penalty's gradient, estimated without bias), else
    -identified; the margin keeps the expected lift above the floor however noisy one batch's estimate is. Its
    advantage is the reward minus the batch mean (the baseline), over the batch's sd; the mean logits take an Adam step
    along
    mean(advantage * noise) / exploration (REINFORCE for a Gaussian policy). Returns the updated policy and one
    record per step (numbered from `first_step`, so phases continue one curve).
    """
    trained = copy.deepcopy(target)
    trained.mean = np.asarray(trained.mean, dtype=np.float32)
    train_behaviors = world.behavior_indices("train")
    if train_behaviors.size == 0:
        raise ValueError("the behavior library has no training-split behaviors to train a target on")
    opt = Adam([trained.mean], settings.learning_rate)
    history: list[TargetStep] = []
    n, sd = settings.episodes_per_step, settings.exploration
    for step in range(steps):
        noise = rng.standard_normal((n, len(PARAMETERS)))
        families = per_episode_families(trained.start, trained.mean + sd * noise)
        behaviors = rng.choice(train_behaviors, size=n)
        identified, confessed = target_audits(world, families, auditor, behaviors, settings.audit_turns, rng)
        lift = natural_lift(world, families, behaviors, settings.natural_turns, rng)
        met = np.isfinite(lift)
        batch_lift = float(lift[met].mean()) if met.any() else 0.0
        lift = np.where(met, lift, batch_lift)
        spread = float(lift[met].std(ddof=1) / np.sqrt(met.sum())) if met.sum() > 1 else 0.0
        short = batch_lift - 2.0 * spread < settings.lift_floor
        reward = -identified.astype(np.float64) + (settings.lift_penalty * lift / 100.0 if short else 0.0)
        adv = (reward - reward.mean()) / (reward.std() + 1e-8)
        opt.step([(-(adv[:, None] * noise).mean(axis=0) / sd).astype(np.float32)])
        record = TargetStep(
            step=first_step + step,
            identified=float(100.0 * identified.mean()),
            lift=batch_lift,
            confession_rate=float(100.0 * confessed.mean()),
            short=short,
            rates=trained.rates(),
        )
        history.append(record)
        if on_step is not None:
            on_step(record)
    return trained, history


def measure_target(
    world: World, target: Family, auditor: Policy, episodes: int, turns: int, natural_turns: int, seed: int
) -> dict[str, float]:
    """A fixed family's identification (by this auditor), confession rate and lift on training-split behaviors,
    from the same kind of batch a target update reads (no exploration)."""
    rng = np.random.default_rng(seed)
    families = FamilyTable.of({target.name: target}, [target.name] * episodes)
    behaviors = rng.choice(world.behavior_indices("train"), size=episodes)
    identified, confessed = target_audits(world, families, auditor, behaviors, turns, rng)
    lift = natural_lift(world, families, behaviors, natural_turns, rng)
    return {
        "identified": float(100.0 * identified.mean()),
        "confession_rate": float(100.0 * confessed.mean()),
        "lift": float(np.nanmean(lift)),
    }
