"""The small-model experiment's own config section (`experiment:` with `name: small_lm`), and its loader.

The trainer's config (auditrl.train.config) carries the section without reading it; this module validates it,
checks it against the rest of the run, and names the file and the field `experiment.<name>` when it is wrong.
The history of each setting (which run tried it, what it measured) is in docs/experiments/small_lm_runs.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, field_validator

from auditrl.configfile import ConfigFileError, validation_problems
from auditrl.models.capabilities import provider_info
from auditrl.models.specs import check_model_spec
from auditrl.train.config import ExperimentSection, GRPOLMConfig, load_config

NAME = "small_lm"
QuoteUnit = Literal["span", "sentence"]
"""What a report grammar's quote may be: any span of a reply that starts at a word, or one whole sentence of a reply."""


class SmallLMSettings(ExperimentSection):
    """How the small-model experiment shapes a GRPO run: the report turn's decoding, who probes, which groups train,
    and how the report's quote and verdict are paid."""

    name: Literal["small_lm"] = Field(description="This experiment.")
    claim_exploration: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description="Share of each group's rollouts whose report opens with a claim: after the begun "
        '`{"no_behavior_found": `, the prompt set\'s claim opening (the verdict `false` and the keys up to the '
        "description) is set instead of sampled, scored and trained at the policy's own probability; the "
        "description is the model's. A policy that almost never claims never samples a finding for the reward to "
        "pay; this puts claims beside silence on the same target. It biases the gradient towards the mixed "
        "policy's (an exploration choice, like epsilon-greedy). Needs the `guided` prompt set, HF generation and "
        "top_p 1.",
    )
    claim_exploration_targets: Literal["all", "planted"] = Field(
        default="all",
        description="Which groups claim exploration reaches. `all`: every group. `planted`: only groups whose target "
        "carries a planted behavior (the trainer knows which, as the reward's judge does); benign groups then teach "
        '"nothing found" through the policy\'s own claims alone. Under the binary reward a forced claim on a benign '
        "target always loses to silence while one on a planted target wins only when credited, so with `all` a "
        "policy whose claims are seldom credited is pushed towards never claiming.",
    )
    report_grammar: Literal["free", "verdict_quote", "quote_verdict"] = Field(
        default="free",
        description="How the report turn is decoded (auditrl.experiments.small_lm.report_grammar). `free`: the "
        "policy writes it. `verdict_quote`: the policy draws only the verdict and, for a claim, a verbatim span of the "
        "target's replies to quote; the prompt set's fixed words make the rest (`It wrote:` before the quote, the JSON "
        "around it), so every report parses and a claim is the target's own words. `quote_verdict`: the policy first "
        "quotes the span it takes as its evidence, then draws the verdict right after it; a claim's description "
        "repeats the evidence (needs the `guided_evidence` prompt set). The fixed tokens are context, never trained "
        "on; the verdict and quote are trained at the policy's unconstrained probabilities (TRL scores sampled tokens "
        "so), which biases the gradient as claim exploration does. Needs the `guided` prompt set (`guided_evidence` "
        "for `quote_verdict`), HF generation and top_p 1.",
    )
    quote_unit: QuoteUnit = Field(
        default="span",
        description="What a report grammar's quote may be: `span`, any run of words of one target reply (stopped "
        "where the report budget ends); `sentence`, one whole sentence of a reply (split after `.`, `!` or `?`; "
        "sentences too long for the report budget are left out). A sentence leaves the policy a handful of choices "
        "per audit instead of thousands of spans, so which evidence to quote can be learnt from few groups.",
    )
    trained_tokens: Literal["all", "quote"] = Field(
        default="all",
        description="Which of the policy's sampled tokens GRPO trains. `all`: every one a constraint did not force. "
        "`quote`: only the report's evidence quote; the verdict (and any probing of the policy's own) stays in "
        "context out of the loss, so the claim threshold moves only as far as the shared LoRA weights and the chosen "
        "evidence move it. Needs report_grammar: quote_verdict, quote_credit: claim or expected, and no "
        "claim_rate_target. Why: GRPO's pull on the verdict moved FP calibration while the quote improved; the "
        "shared weights still move the verdict, so set the claim threshold after training (report_learning's reset).",
    )
    probing: Literal["auditor", "teacher"] = Field(
        default="auditor",
        description="Who writes the audit turns before the report. `auditor`: the policy (a whole audit). `teacher`: "
        "`probing_teacher` does, and the policy reads its probing and writes only the report; the teacher's turns "
        "are context, never trained on. A report-writing curriculum: a policy whose own probing rarely shows the "
        "behavior seldom has a finding to report, while a teacher's probing shows it more often.",
    )
    probing_teacher: str = Field(
        default="scripted/teacher",
        description="The model that writes the probing turns when `probing: teacher` (any auditor model string that "
        "continues a begun reply when the prompt set begins one).",
    )
    planted_groups: Literal["all", "shown", "creditable"] = Field(
        default="all",
        description="Which planted groups a step trains on. `all`: as drawn. `shown` (auditrl.experiments.small_lm."
        "curriculum): only (behavior, seed, family) whose teacher probing showed the behavior, screened once before "
        "training; each other planted draw is replaced by one of them. `creditable`: of those, only the ones where "
        "some quote of a reply that showed it is a claim the offline claim grader credits (`It wrote: <span>`, as "
        "the report grammar writes it). For report-only training (`probing: teacher`) on `sim/` targets, whose "
        "replies carry the ground truth and replay the screened probing exactly. A curriculum, not a reward: the "
        "simulator's ground truth picks the data, the policy reads only the transcript.",
    )
    quote_credit: Literal["rollout", "claim", "expected"] = Field(
        default="rollout",
        description="The advantage the report's quote is trained with (report_grammar: quote_verdict). `rollout`: "
        "the audit's, like every other token. `claim`: the group-relative advantage of what a claim quoting it would "
        'earn, scored by the same design (a "nothing found" report\'s evidence is graded as if it had claimed), '
        "while the verdict keeps the audit's. Why: under `rollout` a benign group pays silence and docks a claim, and "
        "the quote that led to the claim shares the dock, so benign groups teach the policy to quote less telling "
        "words while planted groups teach the opposite. `expected`: what the report earns in expectation over the "
        "policy's own verdict after the quote, P(claim) times the claim's reward plus P(nothing found) times "
        "silence's (both scored by the design; P(claim) as the policy drew its verdict). Why: under `claim` every "
        "quote on a benign target earns the same 0, so benign groups teach the quote nothing; with `expected` a "
        "benign group pays the quotes its verdict stays silent after.",
    )
    expected_verdict: Literal["policy", "start"] = Field(
        default="policy",
        description="Under quote_credit: expected, whose P(claim) after the quote weighs the claim's reward against "
        "silence's. `policy`: the policy's own, as it drew its verdict. `start`: the starting policy's after the "
        "same sentence, every sentence of every training row scored once before the first step (auditrl.experiments."
        "small_lm.start_verdict), so the quote is trained for an auditor that quotes with the trained policy and "
        "keeps its start's verdict (report_learning's start-verdict table evaluates it). Needs report_grammar: "
        "quote_verdict, quote_unit: sentence and probing: teacher. Why: the policy's verdict moves through the LoRA "
        "weights it shares with the quote even out of the loss.",
    )
    claim_rate_target: Annotated[float, Field(ge=0.0, le=1.0)] | Literal["start"] | None = Field(
        default=None,
        description="Hold the policy's claim threshold: a cost is taken off the reward of every audit that claims, "
        "planted or benign alike, and after each step it rises by `claim_cost_step` times how far the step's benign "
        "claim rate (the policy's mean P(claim) at its verdicts) lies above this target, and falls when below "
        "(auditrl.experiments.small_lm.claim_threshold). A rate in [0, 1], or `start`: on each benign row, the "
        "starting policy's own exact claim rate there, computed once before the first step (needs report_grammar: "
        "quote_verdict, quote_unit: sentence and probing: teacher); a fixed rate is compared with rows whose rates "
        "differ widely, `start` with the same row. Why: GRPO moves how readily the policy claims anywhere, and that "
        "alone can decide identification and FP calibration; with the threshold held, the reward rises only by "
        "claiming on planted targets' evidence rather than on benign targets. None: no cost. Needs benign groups "
        "(data.benign_fraction > 0).",
    )
    claim_cost_step: float = Field(
        default=0.1,
        gt=0.0,
        description="How fast the claim cost follows (claim_rate_target): after each step it rises by this times the "
        "step's benign claim rate minus the target, so 0.1 moves it 0.01 reward after a step 10 points above. Small, "
        "because one step's benign audits share one or two targets whose claim rates differ widely.",
    )

    @field_validator("probing_teacher")
    @classmethod
    def _probing_teacher(cls, value: str) -> str:
        return check_model_spec(value, "probing teacher")


def claims_per_group(claim_exploration: float, group_size: int) -> int:
    """How many rollouts of each group claim exploration makes claim."""
    return round(claim_exploration * group_size)


def small_lm(cfg: GRPOLMConfig) -> SmallLMSettings:
    """The experiment's settings of a run (its defaults where the config has no `experiment:` section)."""
    section = cfg.experiment
    if isinstance(section, SmallLMSettings):
        return section
    return SmallLMSettings.model_validate(section.model_dump() if section is not None else {"name": NAME})


def with_settings(cfg: GRPOLMConfig, **fields: object) -> GRPOLMConfig:
    """`cfg` with these experiment settings (the others as they were), validated and checked against the run."""
    merged = small_lm(cfg).model_copy(update=fields)
    settings = SmallLMSettings.model_validate(merged.model_dump())
    out = cfg.model_copy(update={"experiment": settings})
    check_run(out, settings)
    return out


def check_run(cfg: GRPOLMConfig, s: SmallLMSettings) -> None:
    """Raise ValueError (naming `experiment.<field>`) where the settings do not fit the rest of the run."""
    if s.report_grammar != "free":
        _check_report_constraint(cfg, s, "report_grammar", s.report_grammar)
    if s.claim_exploration:
        _check_report_constraint(cfg, s, "claim_exploration", s.claim_exploration)
        if not claims_per_group(s.claim_exploration, cfg.data.group_size):
            raise ValueError(
                f"experiment.claim_exploration={s.claim_exploration} sets no rollout of a group of "
                f"data.group_size={cfg.data.group_size}; use at least {0.5 / cfg.data.group_size:.3g}"
            )
    if s.planted_groups != "all":
        _check_shown_curriculum(cfg, s)
    if s.quote_credit != "rollout" and s.report_grammar != "quote_verdict":
        raise ValueError(
            f"experiment.quote_credit={s.quote_credit} grades the report's evidence quote as a claim; it needs "
            f"experiment.report_grammar: quote_verdict (got {s.report_grammar!r})"
        )
    if s.claim_rate_target is not None and not cfg.data.benign_fraction:
        raise ValueError(
            "experiment.claim_rate_target holds the benign claim rate, which needs benign groups; "
            f"data.benign_fraction is {cfg.data.benign_fraction}"
        )
    exact = (s.report_grammar, s.quote_unit, s.probing) == ("quote_verdict", "sentence", "teacher")
    if s.claim_rate_target == "start" and not exact:
        raise ValueError(
            "experiment.claim_rate_target: start scores every report of the starting policy exactly, which needs "
            "experiment.report_grammar: quote_verdict, quote_unit: sentence and probing: teacher "
            f"(got {s.report_grammar}, {s.quote_unit}, {s.probing})"
        )
    if s.trained_tokens == "quote" and (
        s.report_grammar != "quote_verdict" or s.quote_credit == "rollout" or s.claim_rate_target is not None
    ):
        raise ValueError(
            "experiment.trained_tokens: quote trains the evidence quote alone, with its own credit; it needs "
            "experiment.report_grammar: quote_verdict, quote_credit: claim or expected and no claim_rate_target "
            "(a claim cost acts on the verdict, which stays out of the loss) "
            f"(got {s.report_grammar}, {s.quote_credit}, {s.claim_rate_target})"
        )
    if s.expected_verdict == "start" and not (exact and s.quote_credit == "expected"):
        raise ValueError(
            "experiment.expected_verdict: start weighs the quote's credit by the starting policy's verdict after each "
            "sentence, scored before the first step; it needs experiment.quote_credit: expected, report_grammar: "
            f"quote_verdict, quote_unit: sentence and probing: teacher (got {s.quote_credit}, {s.report_grammar}, "
            f"{s.quote_unit}, {s.probing})"
        )


def _check_shown_curriculum(cfg: GRPOLMConfig, s: SmallLMSettings) -> None:
    """Screening planted groups needs the teacher's probing (the policy's own would differ from the screened one)
    and targets whose replies carry the ground truth and repeat for the same conversation (`sim/`)."""
    if s.probing != "teacher":
        raise ValueError(
            f"experiment.planted_groups={s.planted_groups} screens the teacher's probing; set experiment.probing: "
            f"teacher (got {s.probing!r})"
        )
    provider = cfg.episodes.target_model.partition("/")[0]
    if not provider_info(provider).family_targets:
        raise ValueError(
            f"experiment.planted_groups={s.planted_groups} reads whether the behavior showed from the target's "
            f"ground truth, which only sim/ targets write; got episodes.target_model {cfg.episodes.target_model!r}"
        )


def _check_report_constraint(cfg: GRPOLMConfig, s: SmallLMSettings, name: str, value: object) -> None:
    """A setting that masks the report turn's sampling (claim exploration, the report grammar) needs the prompt
    set whose report opening ends where the grammar begins (`guided`: the verdict, with a claim opening;
    `guided_evidence` under `quote_verdict`: the evidence quote), HF generation (the mask is a transformers
    logits processor) and no nucleus filtering (which runs first and could remove every allowed token)."""
    needed = "guided_evidence" if s.report_grammar == "quote_verdict" else "guided"
    if cfg.episodes.auditor_prompt != needed:
        begins = (
            "its report opening ends where the evidence quote begins"
            if needed == "guided_evidence"
            else "its report opening ends where the verdict begins and it has a claim opening"
        )
        raise ValueError(
            f"experiment.{name}={value} needs episodes.auditor_prompt: {needed} ({begins}); "
            f"got {cfg.episodes.auditor_prompt!r}"
        )
    if cfg.trainer.use_vllm:
        raise ValueError(f"experiment.{name} constrains HF generation; set trainer.use_vllm: false")
    if cfg.episodes.top_p < 1.0:
        raise ValueError(
            f"experiment.{name} with episodes.top_p={cfg.episodes.top_p}: nucleus filtering runs first and can "
            "remove every token the constraint allows; set top_p: 1.0"
        )


def load_run_config(path: Path) -> GRPOLMConfig:
    """A `grpo_lm` config with this experiment's section validated and checked against the run; a problem names
    the file and the field."""
    path = Path(path)
    cfg = load_config(path)
    raw = cfg.experiment.model_dump() if cfg.experiment is not None else {"name": NAME}
    try:
        settings = SmallLMSettings.model_validate(raw)
    except ValidationError as exc:
        problems = validation_problems(exc).replace("field '", "field 'experiment.")
        raise ConfigFileError(f"{path}: {problems}") from exc
    try:
        check_run(cfg, settings)
    except ValueError as exc:
        raise ConfigFileError(f"{path}: {exc}") from exc
    return cfg.model_copy(update={"experiment": settings})
