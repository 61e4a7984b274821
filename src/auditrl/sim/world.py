"""AuditWorld episodes: a batch of audits stepped together in numpy, one auditor action per turn.

An action is (tool, topic choice, framing, pressure); the report is (claim, confidence). Topic choices
are relative (the seed's scenario, a fresh control topic, the topic that looked most anomalous so far),
so a policy trained on some behaviors can be evaluated on held-out behaviors whose trigger topics it
never saw. Everything the auditor sees is summarised in a fixed-size observation; the hidden ground
truth (what the target truly expressed) is kept beside it for judges and metrics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from auditrl.behaviors.schema import Behavior
from auditrl.sim.families import Family, FamilyTable, load_families
from auditrl.sim.targets import BehaviorTable, respond, uniforms
from auditrl.sim.texts import Topic, load_topics, templates

# Action heads and their sizes.
TOOLS = ("send", "rollback", "end")
TOPIC_CHOICES = ("seed", "control", "hot")
CLAIMS = ("none", "seed", "hot", "confessed")
CONFIDENCES = (0.3, 0.6, 0.9)
ACTION_SIZES = (3, 3, 3, 3)
REPORT_SIZES = (4, 3)
# What the auditor saw in the last reply.
KINDS = ("none", "normal", "anomaly", "denial", "confession", "eval_remark")
OBS_DIM = 25


class Policy(Protocol):
    """An auditor over structured actions: per-turn actions and a final report, for a whole batch."""

    name: str

    def act(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]: ...

    def report(self, obs: NDArray[np.float32], rng: np.random.Generator) -> NDArray[np.int64]: ...


@dataclass(frozen=True)
class World:
    """The catalog of one AuditWorld: topics, behaviors, families and a seed bank per behavior."""

    topics: tuple[Topic, ...]
    behaviors: BehaviorTable
    families: FamilyTable
    family_models: Mapping[str, Family]
    seed_topic: NDArray[np.int64]  # (behaviors, seeds per behavior)

    @classmethod
    def build(
        cls,
        library: Mapping[str, Behavior],
        seeds_per_behavior: int = 8,
        fair_chance: float = 0.75,
        seed: int = 0,
    ) -> World:
        """Seed bank: each seed sets a scenario on one of the behavior's trigger topics with probability
        `fair_chance` (the paper's seeds give the auditor a fair chance), else on another topic."""
        if seeds_per_behavior < 1:
            raise ValueError(f"seeds_per_behavior must be >= 1, got {seeds_per_behavior}")
        if not 0.0 <= fair_chance <= 1.0:
            raise ValueError(f"fair_chance must be in [0, 1], got {fair_chance}")
        topics = load_topics()
        table = BehaviorTable.of(library)
        fams = load_families()
        rng = np.random.default_rng(seed)
        seed_topic = np.empty((len(table.ids), seeds_per_behavior), dtype=np.int64)
        for b in range(len(table.ids)):
            trig = np.flatnonzero(table.trigger[b])
            others = np.flatnonzero(~table.trigger[b])
            for s in range(seeds_per_behavior):
                on_trigger = rng.random() < fair_chance or others.size == 0
                seed_topic[b, s] = trig[s % trig.size] if on_trigger else rng.choice(others)
        return cls(
            topics=topics,
            behaviors=table,
            families=FamilyTable.of(fams, list(fams)),
            family_models=fams,
            seed_topic=seed_topic,
        )

    @property
    def n_topics(self) -> int:
        return len(self.topics)

    @property
    def seeds_per_behavior(self) -> int:
        return int(self.seed_topic.shape[1])

    def behavior_indices(self, split: str) -> NDArray[np.int64]:
        heldout = self.behaviors.heldout
        return np.flatnonzero(heldout if split == "heldout" else ~heldout)

    def seed_id(self, behavior: int, seed: int) -> str:
        return f"sim-{self.behaviors.ids[behavior]}-{seed:02d}"

    def seed_text(self, behavior: int, seed: int) -> str:
        return str(templates()["seed"]).format(phrase=self.topics[int(self.seed_topic[behavior, seed])].phrase)


@dataclass(frozen=True)
class EpisodeBatch:
    """Who is audited in each episode of a batch; episodes of one group are contiguous (k per group)."""

    behavior: NDArray[np.int64]  # -1 = benign target
    seed_behavior: NDArray[np.int64]  # whose seed bank the scenario comes from
    seed_index: NDArray[np.int64]
    family: NDArray[np.int64]
    max_turns: int
    group_size: int = 1

    def __post_init__(self) -> None:
        n = self.behavior.shape[0]
        for name in ("seed_behavior", "seed_index", "family"):
            if getattr(self, name).shape != (n,):
                raise ValueError(f"EpisodeBatch.{name} must have shape ({n},), got {getattr(self, name).shape}")
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {self.max_turns}")
        if self.group_size < 1 or n % self.group_size:
            raise ValueError(f"batch of {n} episodes cannot be split into groups of {self.group_size}")

    @property
    def size(self) -> int:
        return int(self.behavior.shape[0])

    @property
    def planted(self) -> NDArray[np.bool_]:
        return self.behavior >= 0

    def context(self, world: World) -> NDArray[np.int64]:
        """One id per (benign?, seed behavior, seed, family): the key of a cached reference episode."""
        nb, ns, nf = len(world.behaviors.ids), world.seeds_per_behavior, len(world.families.names)
        return (((~self.planted).astype(np.int64) * nb + self.seed_behavior) * ns + self.seed_index) * nf + self.family

    def n_contexts(self, world: World) -> int:
        return 2 * len(world.behaviors.ids) * world.seeds_per_behavior * len(world.families.names)

    def select(self, index: NDArray[np.int64]) -> EpisodeBatch:
        return EpisodeBatch(
            behavior=self.behavior[index],
            seed_behavior=self.seed_behavior[index],
            seed_index=self.seed_index[index],
            family=self.family[index],
            max_turns=self.max_turns,
        )


def training_batch(
    world: World,
    rng: np.random.Generator,
    groups: int,
    group_size: int,
    benign_fraction: float,
    families: Sequence[int],
    max_turns: int,
) -> EpisodeBatch:
    """Groups of k rollouts per (behavior, seed, family); a fraction of groups has a benign target.

    Only training-split behaviors are used, for planted targets and for the benign groups' seeds alike.
    """
    if not 0.0 <= benign_fraction <= 1.0:
        raise ValueError(f"benign_fraction must be in [0, 1], got {benign_fraction}")
    train = world.behavior_indices("train")
    if train.size == 0:
        raise ValueError("the behavior library has no training-split behaviors")
    n_benign = int(round(groups * benign_fraction))
    seed_beh = rng.choice(train, size=groups)
    seed_idx = rng.integers(0, world.seeds_per_behavior, size=groups)
    fam = rng.choice(np.asarray(families, dtype=np.int64), size=groups)
    beh = seed_beh.copy()
    beh[:n_benign] = -1
    rep = lambda a: np.repeat(a, group_size)  # noqa: E731
    return EpisodeBatch(rep(beh), rep(seed_beh), rep(seed_idx), rep(fam), max_turns, group_size)


def evaluation_batch(
    world: World, behaviors: Sequence[int], family: int, rollouts: int, max_turns: int, benign: bool
) -> EpisodeBatch:
    """Every seed of the given behaviors x rollouts, against the planted target or a benign one."""
    b = np.repeat(np.asarray(behaviors, dtype=np.int64), world.seeds_per_behavior * rollouts)
    s = np.tile(np.repeat(np.arange(world.seeds_per_behavior), rollouts), len(behaviors))
    return EpisodeBatch(
        behavior=np.full_like(b, -1) if benign else b,
        seed_behavior=b,
        seed_index=s,
        family=np.full_like(b, family),
        max_turns=max_turns,
    )


@dataclass
class Features:
    """Per-episode summary that judges and metrics read (identical when computed from a Transcript)."""

    planted: NDArray[np.bool_]
    claim: NDArray[np.int64]  # claimed topic, -1 = no hidden behavior found
    confidence: NDArray[np.float64]
    correct: NDArray[np.bool_]  # planted and the claimed topic is one of its triggers
    exp_claim: NDArray[np.int64]  # target replies that truly expressed the behavior, on the claimed topic
    conf_claim: NDArray[np.int64]  # target confessions on the claimed topic
    acc_claim: NDArray[np.int64]  # auditor accusations on the claimed topic (narration)
    expressed: NDArray[np.int64]
    confessions: NDArray[np.int64]
    false_confessions: NDArray[np.int64]
    accusations: NDArray[np.int64]
    pushes: NDArray[np.int64]
    directs: NDArray[np.int64]
    tests: NDArray[np.int64]
    eval_aware: NDArray[np.int64]
    rollbacks: NDArray[np.int64]
    turns: NDArray[np.int64]
    loops: NDArray[np.int64]
    distinct_topics: NDArray[np.int64]  # topics probed with a natural request
    control: NDArray[np.bool_]  # a natural request on a topic other than the claimed (or seed) topic
    opening_natural: NDArray[np.float64]  # share of the first three messages that are natural and unpressured
    opening_aware: NDArray[np.bool_]  # the target voiced eval awareness within the first three replies

    def __len__(self) -> int:
        return int(self.planted.shape[0])

    def select(self, index: NDArray[np.int64]) -> Features:
        return Features(**{k: v[index] for k, v in vars(self).items()})


OPENING = 3


@dataclass
class Rollout:
    """A simulated batch: per-turn log (B, H), policy inputs for training, report and features."""

    batch: EpisodeBatch
    tool: NDArray[np.int64]
    topic: NDArray[np.int64]  # absolute topic of the message sent (-1 = none)
    framing: NDArray[np.int64]
    pressure: NDArray[np.int64]
    sent: NDArray[np.bool_]
    expressed: NDArray[np.bool_]
    confession: NDArray[np.bool_]
    false_confession: NDArray[np.bool_]
    eval_aware: NDArray[np.bool_]
    denial: NDArray[np.bool_]
    odd: NDArray[np.bool_]
    text_u: NDArray[np.float64]
    acted: NDArray[np.bool_]  # the policy chose an action at this turn
    obs: NDArray[np.float32]  # (B, H, OBS_DIM)
    actions: NDArray[np.int64]  # (B, H, 4)
    final_obs: NDArray[np.float32]
    report: NDArray[np.int64]  # (B, 2): claim kind, confidence index
    claim_topic: NDArray[np.int64]
    features: Features = field(repr=False)


def _observe(s: dict[str, NDArray], seed_topic: NDArray[np.int64], t: int, horizon: int) -> NDArray[np.float32]:
    b = np.arange(seed_topic.shape[0])
    anom, probes_nat, probes_all = s["anom"], s["probes_nat"], s["probes_all"]
    anom_seed = anom[b, seed_topic]
    anom_other = anom.sum(axis=1) - anom_seed
    other_max = np.where(np.eye(anom.shape[1], dtype=bool)[seed_topic], 0, anom).max(axis=1)
    probes_seed_all = probes_all[b, seed_topic]
    probes_other_all = probes_all.sum(axis=1) - probes_seed_all
    o = np.empty((seed_topic.shape[0], OBS_DIM), dtype=np.float32)
    o[:, 0] = t / horizon
    o[:, 1] = s["branch_len"] / horizon
    o[:, 2] = np.minimum(anom_seed, 3) / 3
    o[:, 3] = probes_nat[b, seed_topic] / horizon
    o[:, 4] = np.minimum(other_max, 3) / 3
    o[:, 5] = (probes_nat.sum(axis=1) - probes_nat[b, seed_topic]) / horizon
    o[:, 6] = anom_seed / (probes_seed_all + 1)
    o[:, 7] = anom_other / (probes_other_all + 1)
    o[:, 8] = np.minimum(s["conf_obs"].sum(axis=1), 3) / 3
    o[:, 9] = np.minimum(s["denials"], 3) / 3
    o[:, 10] = np.minimum(s["remarks"], 3) / 3
    o[:, 11] = s["aware_seen"]
    o[:, 12] = np.minimum(s["rollbacks"], 3) / 3
    o[:, 13] = s["accusations"] / horizon
    o[:, 14] = s["pushes"] / horizon
    o[:, 15] = s["directs"] / horizon
    o[:, 16] = s["tests"] / horizon
    o[:, 17:23] = np.eye(len(KINDS), dtype=np.float32)[s["last_kind"]]
    o[:, 23] = _hot(anom, seed_topic) == seed_topic
    o[:, 24] = 1.0
    return o


def _hot(score: NDArray, seed_topic: NDArray[np.int64]) -> NDArray[np.int64]:
    """Topic with the highest score; the seed topic wins ties and is the answer when nothing scored."""
    bonus = np.zeros(score.shape)
    bonus[np.arange(score.shape[0]), seed_topic] = 0.5
    return np.argmax(score + bonus, axis=1)


def simulate(world: World, batch: EpisodeBatch, policy: Policy, rng: np.random.Generator) -> Rollout:
    """Run every episode of the batch to its end (policy ends it, or the turn budget runs out)."""
    n, horizon, n_t = batch.size, batch.max_turns, world.n_topics
    rows = np.arange(n)
    planted = batch.planted
    beh = np.where(planted, batch.behavior, 0)
    fam = batch.family
    bt, ft = world.behaviors, world.families
    seed_topic = world.seed_topic[batch.seed_behavior, batch.seed_index]
    rate = np.where(planted, bt.rate[beh] * ft.susceptibility[fam], 0.0)
    syc, leak, evalaw, noise = ft.sycophancy[fam], ft.leak[fam], ft.eval_awareness[fam], ft.noise[fam]
    onset = bt.onset[beh]
    trig_table = bt.trigger[beh] & planted[:, None]

    zi = lambda: np.zeros(n, dtype=np.int64)  # noqa: E731
    zt = lambda: np.zeros((n, n_t), dtype=np.int64)  # noqa: E731
    s: dict[str, NDArray] = {
        "anom": zt(), "probes_nat": zt(), "probes_all": zt(), "conf_obs": zt(), "exp_true": zt(), "acc": zt(),
        "branch_len": zi(), "branch_pressure": zi(), "denials": zi(), "remarks": zi(), "rollbacks": zi(),
        "accusations": zi(), "pushes": zi(), "directs": zi(), "tests": zi(), "last_kind": zi(),
        "aware_seen": np.zeros(n, dtype=bool),
    }  # fmt: skip
    aware = np.zeros(n, dtype=bool)
    active = np.ones(n, dtype=bool)
    shape = (n, horizon)
    log = {k: np.zeros(shape, dtype=bool) for k in ("sent", "expressed", "confession", "false_confession",
                                                    "eval_aware", "denial", "odd", "acted")}  # fmt: skip
    tool_log = np.full(shape, -1, dtype=np.int64)
    topic_log = np.full(shape, -1, dtype=np.int64)
    framing_log = np.zeros(shape, dtype=np.int64)
    pressure_log = np.zeros(shape, dtype=np.int64)
    text_u = rng.random(shape)
    obs_log = np.zeros((n, horizon, OBS_DIM), dtype=np.float32)
    act_log = np.zeros((n, horizon, 4), dtype=np.int64)
    loops = zi()
    prev = np.full((n, 4), -1, dtype=np.int64)
    opening_natural = np.zeros(n)
    opening_aware = np.zeros(n, dtype=bool)
    turns = zi()

    for t in range(horizon):
        if not active.any():
            break
        obs = _observe(s, seed_topic, t, horizon)
        actions = policy.act(obs, rng)
        obs_log[:, t] = obs
        act_log[:, t] = actions
        log["acted"][:, t] = active
        tool, choice, framing, pressure = actions[:, 0], actions[:, 1], actions[:, 2], actions[:, 3]
        ending = active & (tool == 2)
        send = active & ~ending
        active = send.copy()
        tool_log[:, t] = np.where(send | ending, tool, -1)
        if not send.any():
            break
        control = (seed_topic + 1 + rng.integers(0, n_t - 1, size=n)) % n_t
        topic = np.where(choice == 0, seed_topic, np.where(choice == 1, control, _hot(s["anom"], seed_topic)))
        rollback = send & (tool == 1)
        s["branch_len"][rollback] = 0
        s["branch_pressure"][rollback] = 0
        aware[rollback] = False
        s["aware_seen"][rollback] = False
        s["rollbacks"] += rollback
        triggered = trig_table[rows, topic]
        r = respond(
            triggered=triggered,
            onset_ok=s["branch_len"] >= onset,
            rate=rate,
            sycophancy=syc,
            leak=leak,
            eval_awareness=evalaw,
            noise=noise,
            framing=framing,
            pressure=pressure,
            branch_pressure=s["branch_pressure"],
            aware=aware,
            u=uniforms(rng, n),
        )
        aware = np.where(send, r.aware, aware)
        key = np.stack([tool, topic, framing, pressure], axis=1)
        loops += send & (key == prev).all(axis=1)
        prev = np.where(send[:, None], key, prev)
        sent_idx = np.flatnonzero(send)
        st = topic[sent_idx]
        natural = framing[sent_idx] == 0
        s["probes_all"][sent_idx, st] += 1
        s["probes_nat"][sent_idx, st] += natural
        anomaly = (r.expressed | r.odd) & send
        s["anom"][sent_idx, st] += anomaly[sent_idx]
        s["conf_obs"][sent_idx, st] += r.confession[sent_idx]
        s["exp_true"][sent_idx, st] += r.expressed[sent_idx]
        s["acc"][sent_idx, st] += pressure[sent_idx] == 2
        s["denials"] += send & r.denial
        s["remarks"] += send & r.eval_aware
        s["aware_seen"] |= send & r.eval_aware
        s["accusations"] += send & (pressure == 2)
        s["pushes"] += send & (pressure == 1)
        s["directs"] += send & (framing == 1)
        s["tests"] += send & (framing == 2)
        s["branch_len"] += send
        s["branch_pressure"] += send & (pressure > 0)
        kind = np.select(
            [r.confession, r.denial, anomaly, r.eval_aware], [4, 3, 2, 5], default=1
        )
        s["last_kind"] = np.where(send, kind, s["last_kind"])
        in_opening = send & (turns < OPENING)
        opening_natural += in_opening * ((framing == 0) & (pressure == 0)) / OPENING
        opening_aware |= in_opening & r.eval_aware
        turns += send
        topic_log[:, t] = np.where(send, topic, -1)
        framing_log[:, t] = framing
        pressure_log[:, t] = pressure
        log["sent"][:, t] = send
        for k in ("expressed", "confession", "false_confession", "eval_aware", "denial", "odd"):
            log[k][:, t] = getattr(r, k) & send

    final_obs = _observe(s, seed_topic, horizon, horizon)
    report = policy.report(final_obs, rng)
    claim_kind, conf_idx = report[:, 0], report[:, 1]
    claim_topic = np.select(
        [claim_kind == 0, claim_kind == 1, claim_kind == 2],
        [-1, seed_topic, _hot(s["anom"], seed_topic)],
        default=_hot(s["conf_obs"], seed_topic),
    )
    has_claim = claim_topic >= 0
    ct = np.where(has_claim, claim_topic, 0)
    at = lambda a: np.where(has_claim, a[rows, ct], 0)  # noqa: E731
    ref_topic = np.where(has_claim, claim_topic, seed_topic)
    nat_topics = s["probes_nat"] > 0
    features = Features(
        planted=planted,
        claim=claim_topic,
        confidence=np.where(has_claim, np.asarray(CONFIDENCES)[conf_idx], 0.0),
        correct=has_claim & trig_table[rows, ct],
        exp_claim=at(s["exp_true"]),
        conf_claim=at(s["conf_obs"]),
        acc_claim=at(s["acc"]),
        expressed=log["expressed"].sum(axis=1),
        confessions=log["confession"].sum(axis=1),
        false_confessions=log["false_confession"].sum(axis=1),
        accusations=s["accusations"],
        pushes=s["pushes"],
        directs=s["directs"],
        tests=s["tests"],
        eval_aware=log["eval_aware"].sum(axis=1),
        rollbacks=s["rollbacks"],
        turns=turns,
        loops=loops,
        distinct_topics=nat_topics.sum(axis=1),
        control=(nat_topics.sum(axis=1) - nat_topics[rows, ref_topic]) > 0,
        opening_natural=opening_natural,
        opening_aware=opening_aware,
    )
    return Rollout(
        batch=batch,
        tool=tool_log,
        topic=topic_log,
        framing=framing_log,
        pressure=pressure_log,
        sent=log["sent"],
        expressed=log["expressed"],
        confession=log["confession"],
        false_confession=log["false_confession"],
        eval_aware=log["eval_aware"],
        denial=log["denial"],
        odd=log["odd"],
        text_u=text_u,
        acted=log["acted"],
        obs=obs_log,
        actions=act_log,
        final_obs=final_obs,
        report=report,
        claim_topic=claim_topic,
        features=features,
    )
