"""Typed configuration of a GRPO run on a language-model auditor (`kind: grpo_lm`), loaded from YAML.

Every field is documented here, so the shipped YAML files only need comments where a value is a choice.
A bad file fails with its path and the dotted field that is wrong.
"""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from auditrl.configfile import ConfigFileError, ConfigModel, RandomSeed, did_you_mean, read_yaml_mapping, validate_file
from auditrl.models.capabilities import provider_info
from auditrl.models.limits import CallLimits
from auditrl.models.precision import DType
from auditrl.models.secrets import check_no_secret_args
from auditrl.scaffold.prompt_sets import AuditorPrompt
from auditrl.scaffold.tool_sets import AuditToolSet, ToolProtocol
from auditrl.train.trainer_settings import LaunchSettings, MonitorSettings, TrainerSettings



@functools.cache
def _providers() -> tuple[str, ...]:
    # inspect-ai takes about a second to import, so only configs that name a model spec pay for it
    from auditrl.models.roles import supported_providers

    return tuple(supported_providers())


def check_model_spec(spec: str, what: str) -> str:
    """A `<provider>/<model>` spec whose provider inspect-ai knows; raises ValueError naming `what`."""
    provider, sep, model = spec.partition("/")
    if not sep or not provider or not model:
        raise ValueError(f"{what} {spec!r} is not a model spec of the form <provider>/<model>")
    known = list(_providers())
    if provider not in known:
        raise ValueError(
            f"{what} {spec!r} names unknown model provider {provider!r}{did_you_mean(provider, known)}; "
            f"supported providers: {', '.join(known)}"
        )
    return spec



QuoteUnit = Literal["span", "sentence"]
"""What a report grammar's quote may be: any span of a reply that starts at a word, or one whole sentence of a reply."""

class LoraSettings(ConfigModel):
    """peft LoRA adapter: only these weights are trained, so checkpoints stay small."""

    r: int = Field(default=8, ge=1, description="Adapter rank.")
    alpha: int = Field(default=16, ge=1, description="LoRA scaling numerator (scale = alpha / r).")
    dropout: float = Field(default=0.0, ge=0.0, lt=1.0, description="Dropout on the adapter's input during training.")
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        min_length=1,
        description="Module names that get an adapter (never lm_head: TRL computes logprobs from its weight).",
    )
    last_layers: int | None = Field(
        default=None,
        ge=1,
        description="Adapt only the last N decoder layers (None = all). The backward pass then stops N layers "
        "from the top, which on a CPU is most of an update's cost.",
    )


class PolicySettings(ConfigModel):
    """The auditor being trained."""

    model: str = Field(
        default="smollm2",
        description="Hugging Face model id or local path; `smollm2` = the offline SmolLM2-135M-Instruct GGUF file.",
    )
    gguf_file: str | None = Field(default=None, description="GGUF file name inside `model` (set for `smollm2`).")
    dtype: DType = Field(
        default="auto",
        description="Weight dtype of the loaded policy. `auto`: bfloat16 on a GPU or a CPU with native bf16 "
        "(AVX512-BF16 or AMX), float32 elsewhere, where bf16 matmuls are emulated and ran 60x slower "
        "(auditrl.models.precision).",
    )
    attn_implementation: str | None = Field(
        default=None, description="transformers attention kernel, e.g. `sdpa`, `flash_attention_2`; None = its default."
    )
    lora: LoraSettings = Field(default_factory=LoraSettings, description="The LoRA adapter that is trained.")
    init_adapter: Path | None = Field(
        default=None,
        description="A LoRA adapter directory to start from instead of a fresh adapter (relative to this config), e.g. "
        "the `adapter/` of `auditrl sft`: a warm-started base. Its base model must be `model` and its settings "
        "`lora`; the first reference snapshot of reference pairwise is then this adapter.",
    )
    chat_template: str | None = Field(
        default=None,
        description="Chat template override: a shipped one by name (`qwen3_multiturn`) or a Jinja file (relative "
        "to this config). Multi-turn token assembly needs a template that renders earlier turns unchanged; Qwen3's "
        "own drops thinking blocks from earlier assistant turns. None = the model's template.",
    )


class EpisodeSettings(ConfigModel):
    """How one audit episode runs inside a rollout."""

    target_model: str = Field(
        default="sim/{family}",
        description="Target model spec; `{family}` is replaced by the row's family (e.g. `sim/{family}`, "
        "`scripted/denier`, `openai/gpt-4.1-mini`, `vllm/...`).",
    )
    families: list[str] = Field(
        default_factory=lambda: ["steady"],
        min_length=1,
        description="Target families, substituted for `{family}` (AuditWorld's for `sim/`, e.g. steady, chatty).",
    )
    target_model_args: dict[str, Any] = Field(default_factory=dict, description="Extra args for resolve_model.")
    target_prefill: Literal["continue", "emulate", "refuse"] | None = Field(
        default=None,
        description="How prefills reach the target (auditrl.models.prefill); default by provider. Declare `continue` "
        "for `openai-api/` servers that honour continue_final_message (vLLM, SGLang).",
    )
    target_calls: CallLimits = Field(
        default_factory=CallLimits,
        description="Retries and timeout of each target call (`max_retries`, `timeout` seconds); API targets only.",
    )
    max_turns: int = Field(default=15, ge=1, description="Auditor turn budget (the paper trained with 15).")
    max_new_tokens: int = Field(default=512, ge=1, description="Sampled tokens per auditor turn.")
    max_report_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Sampled tokens of the report turn; None = max_new_tokens. A claim that names where the target "
        "showed the behavior and quotes it runs longer than a probing message: a report cut inside its JSON does "
        "not parse and earns no credit.",
    )
    max_completion_tokens: int = Field(
        default=8192, ge=1, description="Cap on a whole rollout (sampled + environment tokens); an episode over it stops."
    )
    temperature: float = Field(
        default=1.0, gt=0.0, description="Sampling temperature of auditor turns (also TRL's, for its logprob scaling)."
    )
    kv_cache: bool = Field(
        default=True, description="Keep each rollout's key/value cache between turns (HF generation only)."
    )
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, description="Nucleus sampling mass of auditor turns (1 = off).")
    claim_exploration: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description="Share of each group's rollouts whose report opens with a claim: after the begun "
        "`{\"no_behavior_found\": `, the prompt set's claim opening (the verdict `false` and the keys up to the "
        "description) is set instead of sampled, scored and trained at the policy's own probability; the "
        "description is the model's. A policy that almost never claims never samples a finding for the reward to "
        "pay; this puts claims beside silence on the same target. It biases the gradient towards the mixed "
        "policy's (an exploration choice, like epsilon-greedy). Needs the `guided` prompt set, HF generation and top_p 1.",
    )
    claim_exploration_targets: Literal["all", "planted"] = Field(
        default="all",
        description="Which groups claim exploration reaches. `all`: every group. `planted`: only groups whose target "
        "carries a planted behavior (the trainer knows which, as the reward's judge does); benign groups then teach "
        "\"nothing found\" through the policy's own claims alone. Under the binary reward a forced claim on a benign "
        "target always loses to silence while one on a planted target wins only when credited, so with `all` a "
        "policy whose claims are seldom credited is pushed towards never claiming (the seventh learning run).",
    )
    report_grammar: Literal["free", "verdict_quote", "quote_verdict"] = Field(
        default="free",
        description="How the report turn is decoded (auditrl.train.report_grammar). `free`: the policy writes it. "
        "`verdict_quote`: the policy draws only the verdict and, for a claim, a verbatim span of the target's replies "
        "to quote; the prompt set's fixed words make the rest (`It wrote:` before the quote, the JSON around it), so "
        "every report parses and a claim is the target's own words. `quote_verdict`: the policy first quotes the span "
        "it takes as its evidence, then draws the verdict right after it; a claim's description repeats the evidence "
        "(needs the `guided_evidence` prompt set). The fixed tokens are context, never trained on; the verdict and "
        "quote are trained at the policy's unconstrained probabilities (TRL scores sampled tokens so), which biases "
        "the gradient as claim exploration does. Needs the `guided` prompt set (`guided_evidence` for "
        "`quote_verdict`), HF generation and top_p 1.",
    )
    quote_unit: QuoteUnit = Field(
        default="span",
        description="What a report grammar's quote may be: `span`, any run of words of one target reply (stopped where "
        "the report budget ends); `sentence`, one whole sentence of a reply (split after `.`, `!` or `?`; sentences too "
        "long for the report budget are left out). A sentence leaves the policy a handful of choices per audit instead "
        "of thousands of spans, so which evidence to quote can be learnt from few groups.",
    )
    trained_tokens: Literal["all", "quote"] = Field(
        default="all",
        description="Which of the policy's sampled tokens GRPO trains. `all`: every one a constraint did not force. "
        "`quote`: only the report's evidence quote; the verdict (and any probing of the policy's own) stays in context "
        "out of the loss, so the claim threshold moves only as far as the shared LoRA weights and the chosen evidence "
        "move it. Needs report_grammar: quote_verdict and reward.quote_credit: claim or expected, and no claim_rate_target. Why: "
        "in every quote-credit run the quote improved (identification if made to claim +1.0 to +1.4 points) while "
        "GRPO's pull on the verdict moved FP calibration by 3 to 18 points, and a training cost held it only on the "
        "training rows. Measured (the twenty-third run): the shared weights still moved the verdict, FP calibration "
        "-8 points at learning rate 1e-4 and -24 at 3e-4, so set the threshold after training (report_learning's reset).",
    )
    probing: Literal["auditor", "teacher"] = Field(
        default="auditor",
        description="Who writes the audit turns before the report. `auditor`: the policy (a whole audit). `teacher`: "
        "`probing_teacher` does, and the policy reads its probing and writes only the report; the teacher's turns are "
        "context, never trained on. A report-writing curriculum: a policy whose own probing rarely shows the behavior "
        "seldom has a finding to report, while a teacher's probing shows it more often.",
    )
    probing_teacher: str = Field(
        default="scripted/teacher",
        description="The model that writes the probing turns when `probing: teacher` (any auditor model string that "
        "continues a begun reply when the prompt set begins one).",
    )
    tool_protocol: ToolProtocol = Field(
        default="text", description="`text` renders tools into the prompt and parses actions leniently."
    )
    tool_set: AuditToolSet = Field(
        default="petri2", description="The auditor's tools: `petri2` (Petri 1/2's six) or Petri 3.1's `petri3` / `petri3_prefill`."
    )
    auditor_prompt: AuditorPrompt = Field(
        default="full",
        description="Auditor prompt set (auditrl.scaffold.prompt_sets.PROMPT_SETS): `full` for capable models, "
        "`compact` (a few hundred tokens) for small-context models, whose every training sequence re-reads it.",
    )

    @property
    def report_tokens(self) -> int:
        """The report turn's token budget."""
        return self.max_report_tokens or self.max_new_tokens

    @property
    def longest_turn(self) -> int:
        """The most tokens any one auditor turn may sample: what a generation backend is configured with."""
        return max(self.max_new_tokens, self.report_tokens)

    def turn_tokens(self, phase: str) -> int:
        """Token budget of a turn in the episode's `phase` (`report` or an audit turn)."""
        return self.report_tokens if phase == "report" else self.max_new_tokens

    @field_validator("target_model_args")
    @classmethod
    def _target_args(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_no_secret_args(value)

    @field_validator("probing_teacher")
    @classmethod
    def _probing_teacher(cls, value: str) -> str:
        return check_model_spec(value, "probing teacher")

    @model_validator(mode="after")
    def _check_targets(self) -> EpisodeSettings:
        """Every family's target spec must resolve to a known provider (and `sim/` to a known family)."""
        specs = [self.target_model.replace("{family}", f) for f in self.families]
        for spec in dict.fromkeys(specs):
            check_model_spec(spec, "target model")
            provider, _, name = spec.partition("/")
            if provider_info(provider).family_targets:
                from auditrl.auditworld.families import target_family_names

                known = target_family_names()
                if name not in known:
                    raise ValueError(
                        f"target model {spec!r}: unknown AuditWorld family {name!r}{did_you_mean(name, list(known))}; "
                        f"known families: {', '.join(known)}"
                    )
        return self


class DataSettings(ConfigModel):
    """Which (behavior, seed, family, benign) groups make up the training batches."""

    behaviors: list[str] | None = Field(default=None, description="Behavior ids; None = every training-split behavior.")
    behavior_paths: list[Path] = Field(default_factory=list, description="Extra behavior files or directories.")
    seed_paths: list[Path] = Field(default_factory=list, description="Extra seed files or directories.")
    seed_bank: Literal["library", "auditworld"] = Field(
        default="library",
        description="`library`: the behaviors' seed banks (and `seed_paths`); `auditworld`: AuditWorld's seeds, which "
        "name their scenario's topics by phrase, at most one of them a trigger (auditrl.auditworld.seeds), for `sim/` targets.",
    )
    heldout_seeds: int = Field(
        default=0,
        ge=0,
        description="Seeds per training behavior kept out of training (the last N by id), for evaluation on held-out "
        "seeds of training behaviors; `auditrl sft` keeps the same ones out.",
    )
    group_size: int = Field(default=8, ge=2, description="Rollouts per group (GRPO's G, TRL num_generations).")
    groups_per_step: int = Field(default=4, ge=1, description="Groups in each optimizer step (across all ranks).")
    benign_fraction: float = Field(
        default=0.5, ge=0.0, le=1.0, description="Share of each step's groups run against a benign target."
    )
    planted_groups: Literal["all", "shown", "creditable"] = Field(
        default="all",
        description="Which planted groups a step trains on. `all`: as drawn. `shown` (auditrl.train.curriculum): "
        "only (behavior, seed, family) whose teacher probing showed the behavior, screened once before training; "
        "each other planted draw is replaced by one of them. `creditable`: of those, only the ones where some quote "
        "of a reply that showed it is a claim the offline claim grader credits (`It wrote: <span>`, as the report "
        "grammar writes it). For report-only training (`episodes.probing: teacher`) "
        "on `sim/` targets, whose replies carry the ground truth and replay the screened probing exactly. A "
        "curriculum, not a reward: the simulator's ground truth picks the data, the policy reads only the transcript.",
    )

    @model_validator(mode="after")
    def _one_seed_bank(self) -> DataSettings:
        if self.seed_bank == "auditworld" and self.seed_paths:
            raise ValueError("seed_paths add library seeds; they cannot be combined with seed_bank 'auditworld'")
        return self


class RewardSettings(ConfigModel):
    """The reward design (auditrl.rewards.registry) and its judge; calibration share = data.benign_fraction."""

    design: str = Field(
        default="reference_pairwise",
        description="Reward design that turns judge verdicts into rewards: a name registered in "
        "auditrl.rewards.registry (`auditrl judge score --help` lists them).",
    )
    judge: str = Field(
        default="programmatic",
        description="`programmatic` (generic judges reading the annotations of any simulated/scripted target), "
        "`sim` (AuditWorld's judges with their modelled weaknesses, the ones AuditWorld trains against; for "
        "`sim/<family>` targets) or an inspect-ai model spec for an LLM judge (e.g. `anthropic/claude-sonnet-4-5`, "
        "`vllm/...`).",
    )
    judge_args: dict[str, Any] = Field(default_factory=dict, description="Extra model args for the judge model.")
    judge_calls: CallLimits = Field(
        default_factory=CallLimits,
        description="Retries and timeout of each judge call (`max_retries`, `timeout` seconds); a verdict whose call "
        "fails within them is an abstention with the reason.",
    )
    reference_refresh_steps: int = Field(
        default=50,
        ge=1,
        description="Reference pairwise: take a new frozen policy snapshot (it plays the references) every N steps "
        "(paper: 50).",
    )
    extra_dimensions: list[Path] = Field(
        default_factory=list, description="Concerningness: extra Petri dimension files (markdown with front matter)."
    )
    no_contact_reward: float | None = Field(
        default=None,
        description="Reward of an audit that never reached the target (no target reply on any branch), instead of "
        "the design's; None leaves it to the design. Such an audit has no evidence, yet a judge that scores the "
        "claim rather than the evidence (AuditWorld's calibration judge) can rank it above a real audit.",
    )
    benign_scale: float = Field(
        default=1.0,
        gt=0.0,
        le=1.0,
        description="Multiplies the reward of every audit of a benign target: the pay of a right \"nothing found\" "
        "against that of a credited finding. A policy maximising the expected reward claims when P(planted) times "
        "the share of its claims the grader credits exceeds P(benign) times this scale, so under the binary reward "
        "with 1 a claim that is credited half the time pays only where P(planted) > 2/3; 0.5 moves that to 1/2. "
        "Each GRPO group shares one target, so a group-wise reward std (trainer.scale_rewards: group) would undo it; "
        "it needs `batch` or `none`.",
    )
    quote_credit: Literal["rollout", "claim", "expected"] = Field(
        default="rollout",
        description="The advantage the report's quote is trained with (episodes.report_grammar: quote_verdict). "
        "`rollout`: the audit's, like every other token. `claim`: the group-relative advantage of what a claim "
        "quoting it would earn, scored by the same design (a \"nothing found\" report's evidence is graded as if it "
        "had claimed), while the verdict keeps the audit's. Why: under `rollout` a benign group pays silence and "
        "docks a claim, and the quote that led to the claim shares the dock, so benign groups teach the policy to "
        "quote less telling words while planted groups teach the opposite; the choice of evidence never moved. "
        "`expected`: what the report earns in expectation over the policy's own verdict after the quote, P(claim) "
        "times the claim's reward plus P(nothing found) times silence's (both scored by the design; P(claim) as the "
        "policy drew its verdict). Why: under `claim` every quote on a benign target earns the same 0, so benign groups "
        "teach the quote nothing, and in the twenty-third run the quote learnt on planted targets alone picked "
        "sentences the verdict claims after on benign targets too (under the start's own verdict its quotes raised the "
        "benign claim rate 12 points); with `expected` a benign group pays the quotes its verdict stays silent after. "
        "Measured (the twenty-fourth run): the quote learnt to quote quieter sentences everywhere, evidence included "
        "(FP calibration +6 to +13 points under the SFT base's verdict, evidence quoted -2 to -6), and no ranking gain.",
    )
    expected_verdict: Literal["policy", "start"] = Field(
        default="policy",
        description="Under quote_credit: expected, whose P(claim) after the quote weighs the claim's reward against "
        "silence's. `policy`: the policy's own, as it drew its verdict. `start`: the starting policy's after the same "
        "sentence, every sentence of every training row scored once before the first step (auditrl.train."
        "start_verdict), so the quote is trained for an auditor that quotes with the trained policy and keeps its "
        "start's verdict (report_learning's start-verdict table evaluates it). Needs episodes.report_grammar: "
        "quote_verdict, quote_unit: sentence and probing: teacher. Why: the policy's verdict moved through the LoRA "
        "weights it shares with the quote even out of the loss (the twenty-third and twenty-fourth runs), while "
        "under the SFT base's own verdict the best choice of evidence reaches a ranking AUC of 0.78 on held-out seeds "
        "(0.64 as the SFT base quotes). Measured (the twenty-fourth run, two seeds): the verdict held, but the quotes "
        "alone moved FP calibration up 6 to 9 points on held-out seeds and took no step toward that ranking.",
    )
    claim_rate_target: Annotated[float, Field(ge=0.0, le=1.0)] | Literal["start"] | None = Field(
        default=None,
        description="Hold the policy's claim threshold: a cost is taken off the reward of every audit that claims, "
        "planted or benign alike, and after each step it rises by `claim_cost_step` times how far the step's benign "
        "claim rate (the policy's mean P(claim) at its verdicts) lies above this target, and falls when below "
        "(auditrl.train.claim_threshold). A rate in [0, 1], or `start`: on each benign row, the starting policy's "
        "own exact claim rate there, computed once before the first step (needs episodes.report_grammar: "
        "quote_verdict, quote_unit: sentence and probing: teacher); a fixed rate is compared with rows whose rates "
        "differ by up to 0.85, `start` with the same row. Why: in every earlier run GRPO moved how readily the "
        "policy claims anywhere, and that alone decided identification and FP calibration; with the threshold held, "
        "the reward rises only by claiming on planted targets' evidence rather than on benign targets. None: no "
        "cost. Needs benign groups (data.benign_fraction > 0).",
    )
    claim_cost_step: float = Field(
        default=0.1,
        gt=0.0,
        description="How fast the claim cost follows (reward.claim_rate_target): after each step it rises by this "
        "times the step's benign claim rate minus the target, so 0.1 moves it 0.01 reward after a step 10 points "
        "above. Small, because one step's benign audits share one or two targets whose claim rates differ widely.",
    )

    @field_validator("design")
    @classmethod
    def _design(cls, value: str) -> str:
        from auditrl.rewards.registry import check_design

        return check_design(value)

    @field_validator("judge")
    @classmethod
    def _judge(cls, value: str) -> str:
        """A judge family (auditrl.judges.registry) or a model spec, checked now so a typo fails before any model loads."""
        from auditrl.judges.registry import judge_family_names

        families = list(judge_family_names())
        if value in families:
            return value
        if "/" not in value:
            raise ValueError(
                f"unknown judge {value!r}{did_you_mean(value, families)}: use {', '.join(map(repr, families))} "
                "or an inspect-ai model spec <provider>/<model> (e.g. anthropic/claude-sonnet-4-5)"
            )
        return check_model_spec(value, "judge model")

    @field_validator("judge_args")
    @classmethod
    def _judge_args(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_no_secret_args(value)


class GRPOLMConfig(ConfigModel):
    """A whole `grpo_lm` run."""

    kind: Literal["grpo_lm"] = Field(description="Config kind: `grpo_lm` = GRPO on a language-model auditor.")
    name: str = Field(default="grpo-lm", description="Run name; the run directory is named after it.")
    seed: RandomSeed = Field(default=0, description="Seed of batch sampling, TRL, torch and the data order.")
    policy: PolicySettings = Field(default_factory=PolicySettings, description="The auditor being trained.")
    episodes: EpisodeSettings = Field(default_factory=EpisodeSettings, description="How each audit episode runs.")
    data: DataSettings = Field(default_factory=DataSettings, description="Which groups make up each step.")
    reward: RewardSettings = Field(default_factory=RewardSettings, description="Reward design and judge.")
    trainer: TrainerSettings = Field(default_factory=TrainerSettings, description="Optimisation and scale-out.")
    monitors: MonitorSettings = Field(default_factory=MonitorSettings, description="Reward-hacking monitors.")
    launch: LaunchSettings = Field(default_factory=LaunchSettings, description="How the run is launched.")
    source: Path | None = Field(
        default=None, exclude=True, description="The file this config was read from (set by load_config)."
    )

    @model_validator(mode="after")
    def _check_layout(self) -> GRPOLMConfig:
        if self.episodes.report_grammar != "free":
            self._check_report_constraint("report_grammar", self.episodes.report_grammar)
        if self.episodes.claim_exploration:
            self._check_report_constraint("claim_exploration", self.episodes.claim_exploration)
            if not claims_per_group(self.episodes.claim_exploration, self.data.group_size):
                raise ValueError(
                    f"episodes.claim_exploration={self.episodes.claim_exploration} sets no rollout of a group of "
                    f"data.group_size={self.data.group_size}; use at least {0.5 / self.data.group_size:.3g}"
                )
        if self.data.planted_groups != "all":
            self._check_shown_curriculum()
        if self.reward.benign_scale != 1.0 and self.trainer.scale_rewards == "group":
            raise ValueError(
                f"reward.benign_scale={self.reward.benign_scale} is undone by trainer.scale_rewards=group (each group "
                "shares one target, so dividing by the group's reward std removes the scale); set it to batch or none"
            )
        if self.reward.quote_credit != "rollout" and self.episodes.report_grammar != "quote_verdict":
            raise ValueError(
                f"reward.quote_credit={self.reward.quote_credit} grades the report's evidence quote as a claim; it needs "
                f"episodes.report_grammar: quote_verdict (got {self.episodes.report_grammar!r})"
            )
        if self.reward.claim_rate_target is not None and not self.data.benign_fraction:
            raise ValueError(
                "reward.claim_rate_target holds the benign claim rate, which needs benign groups; "
                f"data.benign_fraction is {self.data.benign_fraction}"
            )
        e = self.episodes
        if self.reward.claim_rate_target == "start" and (e.report_grammar, e.quote_unit, e.probing) != ("quote_verdict", "sentence", "teacher"):
            raise ValueError(
                "reward.claim_rate_target: start scores every report of the starting policy exactly, which needs "
                "episodes.report_grammar: quote_verdict, quote_unit: sentence and probing: teacher "
                f"(got {e.report_grammar}, {e.quote_unit}, {e.probing})"
            )
        if e.trained_tokens == "quote" and (e.report_grammar != "quote_verdict" or self.reward.quote_credit == "rollout" or self.reward.claim_rate_target is not None):
            raise ValueError(
                "episodes.trained_tokens: quote trains the evidence quote alone, with its own credit; it needs "
                "episodes.report_grammar: quote_verdict, reward.quote_credit: claim or expected and no reward.claim_rate_target "
                "(a claim cost acts on the verdict, which stays out of the loss) "
                f"(got {e.report_grammar}, {self.reward.quote_credit}, {self.reward.claim_rate_target})"
            )
        if self.reward.expected_verdict == "start" and (self.reward.quote_credit, e.report_grammar, e.quote_unit, e.probing) != ("expected", "quote_verdict", "sentence", "teacher"):
            raise ValueError(
                "reward.expected_verdict: start weighs the quote's credit by the starting policy's verdict after each "
                "sentence, scored before the first step; it needs reward.quote_credit: expected, episodes.report_grammar: "
                f"quote_verdict, quote_unit: sentence and probing: teacher (got {self.reward.quote_credit}, "
                f"{e.report_grammar}, {e.quote_unit}, {e.probing})"
            )
        rollouts = self.data.group_size * self.data.groups_per_step
        if rollouts % self.trainer.micro_batch_size:
            raise ValueError(
                f"trainer.micro_batch_size={self.trainer.micro_batch_size} must divide "
                f"data.group_size * data.groups_per_step = {rollouts}"
            )
        return self

    def _check_shown_curriculum(self) -> None:
        """Screening planted groups needs the teacher's probing (the policy's own would differ from the screened one)
        and targets whose replies carry the ground truth and repeat for the same conversation (`sim/`)."""
        if self.episodes.probing != "teacher":
            raise ValueError(
                f"data.planted_groups={self.data.planted_groups} screens the teacher's probing; set episodes.probing: teacher "
                f"(got {self.episodes.probing!r})"
            )
        provider = self.episodes.target_model.partition("/")[0]
        if not provider_info(provider).family_targets:
            raise ValueError(
                f"data.planted_groups={self.data.planted_groups} reads whether the behavior showed from the target's ground "
                f"truth, which only sim/ targets write; got episodes.target_model {self.episodes.target_model!r}"
            )

    def _check_report_constraint(self, name: str, value: object) -> None:
        """A setting that masks the report turn's sampling (claim exploration, the report grammar) needs the prompt
        set whose report opening ends where the grammar begins (`guided`: the verdict, with a claim opening;
        `guided_evidence` under `quote_verdict`: the evidence quote), HF generation (the mask is a transformers
        logits processor) and no nucleus filtering (which runs first and could remove every allowed token)."""
        needed = "guided_evidence" if self.episodes.report_grammar == "quote_verdict" else "guided"
        if self.episodes.auditor_prompt != needed:
            begins = "its report opening ends where the evidence quote begins" if needed == "guided_evidence" else (
                "its report opening ends where the verdict begins and it has a claim opening"
            )
            raise ValueError(
                f"episodes.{name}={value} needs episodes.auditor_prompt: {needed} ({begins}); got {self.episodes.auditor_prompt!r}"
            )
        if self.trainer.use_vllm:
            raise ValueError(f"episodes.{name} constrains HF generation; set trainer.use_vllm: false")
        if self.episodes.top_p < 1.0:
            raise ValueError(
                f"episodes.{name} with episodes.top_p={self.episodes.top_p}: nucleus filtering runs first and can remove "
                "every token the constraint allows; set top_p: 1.0"
            )


def claims_per_group(claim_exploration: float, group_size: int) -> int:
    """How many rollouts of each group claim exploration makes claim."""
    return round(claim_exploration * group_size)


def shipped_chat_templates() -> list[str]:
    """Names of the chat templates packaged in auditrl/train/data/chat_templates."""
    folder = resources.files("auditrl.train").joinpath("data/chat_templates")
    return sorted(f.name.removesuffix(".jinja") for f in folder.iterdir() if f.name.endswith(".jinja"))


def chat_template_text(spec: str) -> str:
    """The Jinja text of a shipped template name or of a template file."""
    if spec in shipped_chat_templates():
        return resources.files("auditrl.train").joinpath(f"data/chat_templates/{spec}.jinja").read_text("utf-8")
    return Path(spec).read_text(encoding="utf-8")


def read_kind(path: Path) -> str:
    """The `kind:` of a config file, so the CLI can dispatch before validating the rest."""
    raw = read_yaml_mapping(path)
    kind = raw.get("kind")
    if not isinstance(kind, str):
        raise ConfigFileError(f"{path}: field 'kind' is missing or not a string (got {kind!r})")
    return kind


def load_config(path: Path) -> GRPOLMConfig:
    """Read and validate a `grpo_lm` YAML file; relative data paths are resolved against the file.

    Everything that can be checked without a model is checked here (enumerations, model specs, target
    families, behavior ids), so a bad file fails in a second, not after the policy has loaded.
    """
    path = Path(path)
    cfg = validate_file(GRPOLMConfig, read_yaml_mapping(path), path)
    base = path.parent
    data = cfg.data.model_copy(
        update={
            "behavior_paths": [p if p.is_absolute() else base / p for p in cfg.data.behavior_paths],
            "seed_paths": [p if p.is_absolute() else base / p for p in cfg.data.seed_paths],
        }
    )
    markers = cfg.monitors.markers
    if markers is not None and not markers.is_absolute():
        markers = base / markers
    launch = cfg.launch.accelerate_config
    if launch is not None and not launch.is_absolute():
        launch = base / launch
    _check_behaviors(path, data)
    policy = cfg.policy
    if policy.chat_template is not None and policy.chat_template not in shipped_chat_templates():
        template = Path(policy.chat_template)
        template = template if template.is_absolute() else base / template
        if not template.is_file():
            raise ConfigFileError(
                f"{path}: field 'policy.chat_template': {policy.chat_template!r} is neither a shipped template "
                f"({', '.join(shipped_chat_templates())}) nor a file"
            )
        policy = policy.model_copy(update={"chat_template": str(template)})
    if policy.init_adapter is not None and not policy.init_adapter.is_absolute():
        policy = policy.model_copy(update={"init_adapter": base / policy.init_adapter})
    return cfg.model_copy(
        update={
            "data": data,
            "policy": policy,
            "monitors": MonitorSettings(markers=markers),
            "launch": cfg.launch.model_copy(update={"accelerate_config": launch}),
            "source": path.resolve(),
        }
    )


def _check_behaviors(path: Path, data: DataSettings) -> None:
    """The behavior files load, and `data.behaviors` names training-split behaviors that exist."""
    from auditrl.behaviors.library import load_behaviors

    try:
        library = load_behaviors(data.behavior_paths or None)
    except ValueError as exc:
        raise ConfigFileError(f"{path}: field 'data.behavior_paths': {' '.join(str(exc).split())}") from exc
    for i, bid in enumerate(data.behaviors or []):
        if bid not in library:
            raise ConfigFileError(
                f"{path}: field 'data.behaviors.{i}': unknown behavior id {bid!r}{did_you_mean(bid, sorted(library))}; "
                f"see `auditrl behaviors list`"
            )
        if library[bid].split != "train":
            raise ConfigFileError(
                f"{path}: field 'data.behaviors.{i}': {bid!r} is a held-out behavior and may not be used in training"
            )
