"""Training configs: shipped files load, bad files name the file and field, batches follow the config."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

import auditrl.train.config as train_config
from auditrl.auditworld.transcript_judges import SimPairwiseJudge
from auditrl.behaviors.library import load_behaviors, load_seeds
from auditrl.configfile import read_kind
from auditrl.judges.programmatic import ProgrammaticPairwiseJudge
from auditrl.train.config import ConfigFileError, load_config
from auditrl.train.episodes import training_rows
from auditrl.train.grpo import grpo_arguments
from auditrl.train.reward import design_parts, make_design

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SHIPPED = [
    "cpu_offline.yaml", "gpu_single_vllm.yaml", "multi_gpu_deepspeed.yaml", "multi_gpu_fsdp.yaml",
    "multi_node_deepspeed.yaml", "api_targets.yaml", "paper_recipe.yaml",
]  # fmt: skip


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_configs_load(name: str) -> None:
    cfg = load_config(CONFIGS / name)
    assert cfg.kind == "grpo_lm" and read_kind(CONFIGS / name) == "grpo_lm"
    assert cfg.source == (CONFIGS / name).resolve()


def test_configs_holds_only_starting_points_each_of_which_loads() -> None:
    """configs/ holds the configs a user starts from (experiments keep theirs in configs/experiments/); every one
    validates with its kind's loader (grpo_lm ones are planned in test_plan)."""
    from auditrl.auditworld.job.adversarial import load_adversarial_config
    from auditrl.auditworld.job.config import load_config as load_world
    from auditrl.auditworld.job.sweep import load_sweep_config

    loaders = {
        "grpo_lm": load_config,
        "auditworld": load_world,
        "auditworld_sweep": load_sweep_config,
        "auditworld_adversarial": load_adversarial_config,
    }
    tops = sorted(CONFIGS.glob("*.yaml"))
    assert 0 < len(tops) <= 12 and {p.name for p in tops} >= set(SHIPPED)
    for path in tops:
        assert loaders[read_kind(path)](path) is not None


def test_a_config_must_name_its_policy_in_one_line(tmp_path: Path) -> None:
    for text in ("kind: grpo_lm\n", "kind: grpo_lm\npolicy: {dtype: bfloat16}\n"):
        with pytest.raises(ConfigFileError) as err:
            load_config(_write(tmp_path, text))
        message = str(err.value)
        assert "\n" not in message and message.startswith(str(tmp_path / "bad.yaml"))
        assert "field 'policy.model' is required" in message


def test_cpu_config_maps_to_one_generation_per_step(tmp_path: Path) -> None:
    cfg = load_config(CONFIGS / "cpu_offline.yaml")
    args = grpo_arguments(cfg, tmp_path, world_size=1)
    rollouts = cfg.data.group_size * cfg.data.groups_per_step
    assert args.num_generations == cfg.data.group_size
    assert args.generation_batch_size == rollouts
    assert args.steps_per_generation == args.gradient_accumulation_steps == rollouts // cfg.trainer.micro_batch_size
    assert args.shuffle_dataset is False and args.beta == cfg.trainer.beta


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    return path


def test_bad_field_names_file_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path, "kind: grpo_lm\npolicy: {model: smollm2}\ntrainer:\n  learning_rate: -1\n")
    with pytest.raises(ConfigFileError, match=r"bad\.yaml.*trainer\.learning_rate"):
        load_config(path)


def test_unknown_field_and_kind(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError, match=r"episodes\.max_turn"):
        load_config(_write(tmp_path, "kind: grpo_lm\npolicy: {model: smollm2}\nepisodes:\n  max_turn: 3\n"))
    with pytest.raises(ConfigFileError, match="kind"):
        read_kind(_write(tmp_path, "name: x\n"))
    with pytest.raises(ConfigFileError, match="not valid YAML"):
        read_kind(_write(tmp_path, "kind: [unclosed\n"))


def test_layout_must_divide(tmp_path: Path) -> None:
    text = (
        "kind: grpo_lm\npolicy: {model: smollm2}\ndata: {group_size: 3, groups_per_step: 1}\n"
        "trainer: {micro_batch_size: 2}\n"
    )
    with pytest.raises(ConfigFileError, match="micro_batch_size"):
        load_config(_write(tmp_path, text))


def test_rows_keep_benign_share_and_refuse_held_out(tmp_path: Path) -> None:
    cfg = load_config(CONFIGS / "cpu_offline.yaml")
    cfg = cfg.model_copy(update={"data": cfg.data.model_copy(update={"groups_per_step": 4})})
    behaviors, seeds = load_behaviors(), load_seeds()
    rows = training_rows(cfg, behaviors, seeds)
    assert len(rows) == cfg.trainer.max_steps * 4
    for step in range(cfg.trainer.max_steps):
        batch = rows[step * 4 : (step + 1) * 4]
        assert sum(r.benign for r in batch) == 2
        assert all(r.behavior_id is None or behaviors[r.behavior_id].split == "train" for r in batch)
    held = next(b.id for b in behaviors.values() if b.split == "heldout")
    bad = cfg.model_copy(update={"data": cfg.data.model_copy(update={"behaviors": [held]})})
    with pytest.raises(ValueError, match="data"):
        training_rows(bad, behaviors, seeds)


def test_behaviors_a_sim_target_cannot_show_in_the_turn_budget_are_left_out(tmp_path: Path) -> None:
    """increasing_pep starts after 3 replies: in a 2-turn audit of a sim target any claim of it is a guess."""
    cfg = load_config(CONFIGS / "experiments" / "small_lm" / "cpu_learn.yaml")
    behaviors, seeds = load_behaviors(), load_seeds()
    assert cfg.episodes.max_turns <= 3
    rows = training_rows(cfg, behaviors, seeds)
    assert "increasing_pep" not in {r.behavior_id for r in rows}
    longer = cfg.model_copy(update={"episodes": cfg.episodes.model_copy(update={"max_turns": 4})})
    assert "increasing_pep" in {r.behavior_id for r in training_rows(longer, behaviors, seeds)}
    named = cfg.model_copy(update={"data": cfg.data.model_copy(update={"behaviors": ["flattery", "increasing_pep"]})})
    with pytest.raises(ValueError, match="increasing_pep cannot show on sim/"):
        training_rows(named, behaviors, seeds)


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError) as err:
        load_config(
            _write(tmp_path, "kind: grpo_lm\npolicy: {model: smollm2}\nseed: 0\ntrainer:\n  max_steps: [1, 2\n")
        )
    message = str(err.value)
    assert message.startswith(f"{tmp_path / 'bad.yaml'}: line ") and "<unicode string>" not in message
    assert "\n" not in message


def test_defaults_are_a_valid_config(tmp_path: Path) -> None:
    cfg = load_config(_write(tmp_path, "kind: grpo_lm\npolicy: {model: smollm2}\n"))
    assert cfg.reward.judge == "programmatic" and cfg.episodes.families


@pytest.mark.parametrize(
    ("judge", "pairwise"), [("sim", SimPairwiseJudge), ("programmatic", ProgrammaticPairwiseJudge)]
)
def test_offline_judges_are_accepted_and_wired_into_the_reward(tmp_path: Path, judge: str, pairwise: type) -> None:
    """`sim` trains against AuditWorld's judges, `programmatic` against the generic annotation judges."""
    cfg = load_config(
        _write(
            tmp_path,
            f"kind: grpo_lm\npolicy: {{model: smollm2}}\nreward: {{design: ingroup_pairwise, judge: {judge}}}\n",
        )
    )
    assert cfg.reward.judge == judge
    judges = [p.judge for p in design_parts(make_design(cfg, tmp_path)) if hasattr(p, "judge")]
    assert len(judges) == 2 and all(type(j) is pairwise for j in judges)


def test_a_near_miss_of_sim_is_not_taken_for_a_model(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigFileError,
        match=r"field 'reward\.judge': unknown judge 'simm' \(did you mean 'sim'\?\): use 'programmatic', 'sim'",
    ):
        load_config(_write(tmp_path, "kind: grpo_lm\npolicy: {model: smollm2}\nreward: {judge: simm}\n"))


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        (
            "reward: {judge: programatic}",
            r"bad\.yaml: field 'reward\.judge': unknown judge 'programatic' \(did you mean 'programmatic'\?\)",
        ),
        (
            "reward: {judge: opnai/gpt-4o}",
            r"field 'reward\.judge': .*unknown model provider 'opnai' \(did you mean 'openai'\?\)",
        ),
        ("reward: {judge_args: {api_key: x}}", r"field 'reward\.judge_args': may not carry credentials"),
        ("reward: {design: pairwise}", r"field 'reward\.design'"),
        ("trainer: {loss_type: dappo}", r"field 'trainer\.loss_type'.*'dapo'.*\(got 'dappo'\)"),
        ("trainer: {report_to: [tensorbord]}", r"field 'trainer\.report_to\.0'.*\(got 'tensorbord'\)"),
        ("trainer: {extra: {num_generation: 3}}", r"field 'trainer\.extra'.*'num_generation'.*'num_generations'"),
        (
            "episodes: {families: [steady, chaty]}",
            r"field 'episodes'.*'sim/chaty'.*'chaty' \(did you mean 'chatty'\?\)",
        ),
        ("episodes: {target_model: 'nope/{family}'}", r"field 'episodes'.*unknown model provider 'nope'"),
        (
            "data: {behaviors: [flatery]}",
            r"field 'data\.behaviors\.0': unknown behavior id 'flatery' \(did you mean 'flattery'\?\)",
        ),
        (
            "data: {behaviors: [flattery, secret_loyalty]}",
            r"field 'data\.behaviors\.1': 'secret_loyalty' is a held-out",
        ),
    ],
)
def test_enumerations_are_checked_at_load_time(tmp_path: Path, text: str, pattern: str) -> None:
    with pytest.raises(ConfigFileError, match=pattern) as err:
        load_config(_write(tmp_path, f"kind: grpo_lm\npolicy: {{model: smollm2}}\n{text}\n"))
    assert "\n" not in str(err.value)


def test_model_specs_that_exist_are_accepted(tmp_path: Path) -> None:
    text = (
        "kind: grpo_lm\npolicy: {model: smollm2}\nreward: {judge: anthropic/claude-sonnet-4-5}\n"
        "episodes: {target_model: 'openai-api/{family}', families: [srv/llama]}\n"
    )
    cfg = load_config(_write(tmp_path, text))
    assert cfg.reward.judge == "anthropic/claude-sonnet-4-5"


def _settings_models() -> list[type[BaseModel]]:
    return [
        m
        for m in vars(train_config).values()
        if isinstance(m, type) and issubclass(m, BaseModel) and m is not BaseModel
    ]


def test_every_config_field_is_documented() -> None:
    undocumented = [
        f"{m.__name__}.{n}" for m in _settings_models() for n, f in m.model_fields.items() if not f.description
    ]
    assert len(_settings_models()) >= 7 and undocumented == []


def test_trainer_settings_pass_to_grpo_config_unchanged(tmp_path: Path) -> None:
    cfg = load_config(CONFIGS / "multi_gpu_deepspeed.yaml")
    args = grpo_arguments(cfg, tmp_path, world_size=1)
    passed = cfg.trainer.model_dump(by_alias=True, exclude={"extra"})
    assert "per_device_train_batch_size" in passed
    assert {k: getattr(args, k) for k in passed} == passed


def test_vllm_sampling_and_collective_timeout_are_explicit(tmp_path: Path) -> None:
    """vLLM samples with what GRPOConfig says; a field left None would take the model's generation defaults."""
    single = grpo_arguments(load_config(CONFIGS / "gpu_single_vllm.yaml"), tmp_path, world_size=1)
    assert (single.top_k, single.min_p, single.repetition_penalty) == (0, 0.0, 1.0)
    multi = load_config(CONFIGS / "multi_gpu_deepspeed.yaml")
    assert grpo_arguments(multi, tmp_path, world_size=7).ddp_timeout == multi.trainer.ddp_timeout == 7200
