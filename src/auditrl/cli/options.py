"""Every option more than one command takes, spelled once, and the old spellings that still work.

One concept, one spelling, on every command:
- `--random-seed`: the seed of every random number generator a command uses (bootstrap, clustering,
  subsampling, training, model sampling); `--seed-id`: a seed-instruction id (repeatable).
- `--judge`: a judge model spec, or `programmatic` (offline: reads the ground truth sim/ and scripted/
  targets write); `--judge-cache`: the judge's response cache.
- `--max-turns`: an auditor turn budget (the suite's other two are `--benign-max-turns` and
  `--production-max-turns`).
- `--out`/`-o`: the directory a command writes into; `--html FILE` / `--json FILE`: the report and the
  results of every command that prints results.
- `--max-retries` / `--timeout`: on every command that calls a model.

Options whose help depends on the command are made by the functions below (`random_seed_option("...")`), so
the spelling and the range stay here. Old spellings are rewritten before parsing (`undeprecated`), with
one warning on stderr each; they are not options, so `--help` never shows them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from auditrl.models.limits import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_S
from auditrl.scaffold.prompt_sets import AuditorPrompt
from auditrl.scaffold.tool_sets import AuditToolSet, ToolProtocol

__all__ = ["DEFAULT_MAX_RETRIES", "DEFAULT_TIMEOUT_S"]

PROGRAMMATIC = "programmatic"
"""The offline judge's name in every command (`auditrl.judges.registry.DEFAULT_FAMILY`)."""
SEED_MAX = 2**32 - 1


def random_seed_option(what: str) -> Any:
    """`--random-seed`, saying what it seeds."""
    return typer.Option("--random-seed", min=0, max=SEED_MAX, help=f"Random seed of {what}.")


def seed_ids_option(help: str) -> Any:
    """`--seed-id` (repeatable): seed-instruction ids."""
    return typer.Option("--seed-id", help=help)


def max_turns_option(help: str, name: str = "--max-turns") -> Any:
    """An auditor turn budget: `--max-turns`, or the suite's `--benign-max-turns` / `--production-max-turns`."""
    return typer.Option(name, min=1, help=help)


def _out_dir(value: str | Path) -> Path:
    from auditrl.rundir import out_dir

    if isinstance(value, Path):  # the command's default
        return value
    try:
        return out_dir(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc).removeprefix(f"--out {value!r}: ")) from None


def out_dir_option(help: str) -> Any:
    """`--out`/`-o`: the directory the command writes into (never empty or blank)."""
    return typer.Option("--out", "-o", help=help, parser=_out_dir)


def judge_option(help: str) -> Any:
    """`--judge`: a model spec, or `programmatic`."""
    return typer.Option("--judge", help=help)


def concurrency_option(what: str) -> Any:
    return typer.Option("--concurrency", min=1, help=f"{what} at the same time.")


MaxRetriesOpt = Annotated[
    int,
    typer.Option(
        "--max-retries",
        min=0,
        help="Retries of a failed model call (rate limits, server errors, lost connections, timeouts), every role.",
    ),
]
TimeoutOpt = Annotated[
    int,
    typer.Option(
        "--timeout",
        min=1,
        help="Seconds one model call may take, retries included, before it is recorded as failed (every role).",
    ),
]
JudgeCacheOpt = Annotated[
    Path | None, typer.Option("--judge-cache", help="Judge response cache file (JSONL), reused across runs.")
]
FollowupsOpt = Annotated[int, typer.Option("--followups", min=0, help="Corrective follow-ups before a judge abstains.")]
HtmlOpt = Annotated[Path | None, typer.Option("--html", help="Also write a self-contained HTML page here.")]
JsonOpt = Annotated[Path | None, typer.Option("--json", help="Also write the results as JSON here.")]
MaxTokensOpt = Annotated[int | None, typer.Option("--max-tokens", min=1, help="Max tokens per model reply.")]
TemperatureOpt = Annotated[
    float | None, typer.Option("--temperature", min=0.0, max=2.0, help="Sampling temperature (default: provider's).")
]
AuditorPromptOpt = Annotated[
    AuditorPrompt,
    typer.Option(
        "--auditor-prompt",
        help="Auditor prompt set: full, compact (small-context models, and auditors trained on it) or guided "
        "(compact with each turn begun for the model; text tool protocol only).",
    ),
]
ToolSetOpt = Annotated[
    AuditToolSet,
    typer.Option(
        "--tool-set",
        help="Auditor tools: petri2 (Petri 1/2's six) or Petri 3.1's petri3 (prefill off) / petri3_prefill.",
    ),
]
ToolProtocolOpt = Annotated[
    ToolProtocol | None,
    typer.Option("--tool-protocol", help="Auditor tool protocol, native or text (default: by provider)."),
]
TargetPrefillOpt = Annotated[
    Literal["continue", "emulate", "refuse"] | None,
    typer.Option(
        "--target-prefill",
        help=(
            "How prefills reach the target: continue its final message (declare this for servers with "
            "continue_final_message, e.g. vLLM behind openai-api/), emulate by asking it to begin with them, or "
            "refuse (default: by provider)."
        ),
    ),
]
OnExistingOpt = Annotated[
    Literal["resume", "append", "overwrite"],
    typer.Option(
        "--on-existing",
        help=(
            "When the run directory has audits already: resume (skip the audits it has, run failed ones again), "
            "append (add new rollouts after them) or overwrite (set them aside in transcripts.superseded.jsonl and "
            "start over)."
        ),
    ),
]
BehaviorsDirOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--behaviors-dir",
        help="User behavior file or directory (repeatable); adds to the built-in library; same ids override.",
    ),
]
SeedsDirOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--seeds-dir",
        help="User seed file or directory (repeatable); adds to the built-in seed banks; same ids override.",
    ),
]
DimensionsOpt = Annotated[
    list[Path],
    typer.Option(
        "--dimensions", help="Petri dimension files or folders the concerning judge also rates (with --judge MODEL)."
    ),
]
OpeningsOpt = Annotated[
    Path | None,
    typer.Option(
        "--openings",
        help="Real first user messages for realism (YAML: provenance, openings); default: the packaged proxy.",
    ),
]

DEPRECATED_OPTIONS: dict[str, dict[str, str]] = {
    "audit": {"--seed": "--seed-id", "--sampling-seed": "--random-seed"},
    "seeds list": {"--id": "--seed-id"},
    "suite": {
        "--cache": "--judge-cache",
        "--seed": "--random-seed",
        "--planted-turns": "--max-turns",
        "--benign-turns": "--benign-max-turns",
        "--production-turns": "--production-max-turns",
    },
    "evaluate": {"--cache": "--judge-cache", "--seed": "--random-seed"},
    "judge score": {"--cache": "--judge-cache"},
    "judge pairwise": {"--cache": "--judge-cache"},
    "crux build": {"--seed": "--random-seed"},
    "crux run": {"--turns": "--max-turns", "--sampling-seed": "--random-seed"},
    "transfer": {"--max-samples": "--max-turns", "--sampling-seed": "--random-seed"},
    "implant": {"--seed": "--random-seed", "--anti-confession-steps": "--redteam-steps"},
    "strategies": {"--seed": "--random-seed"},
}
"""Old spellings (until the next minor release) by command: each is read as its new one, with a warning."""
DEPRECATED_VALUES: dict[str, dict[str, dict[str, str]]] = {
    "crux build": {"--judge": {"annotations": PROGRAMMATIC}},
    "implant": {"--judge": {"markers": PROGRAMMATIC}},
}
"""Old values of an option by command, read as the new value with a warning."""


def undeprecated(command: str, args: Sequence[str]) -> tuple[list[str], list[str]]:
    """`args` of `command` ("crux build") with old spellings replaced, and one warning per replacement.

    Both `--opt value` and `--opt=value` are read; nothing after `--` is touched.
    """
    options = DEPRECATED_OPTIONS.get(command, {})
    values = DEPRECATED_VALUES.get(command, {})
    out: list[str] = []
    warnings: list[str] = []
    rest = list(args)
    while rest:
        token = rest.pop(0)
        if token == "--":
            out += [token, *rest]
            break
        name, eq, value = token.partition("=")
        if name in options:
            warnings.append(f"`auditrl {command} {name}` is deprecated and will be removed: use {options[name]}")
            name = options[name]
        renames = values.get(name, {})
        if not eq and renames and rest and rest[0] in renames:
            value, eq = rest.pop(0), " "
        if value in renames:
            warnings.append(
                f"`auditrl {command} {name} {value}` is deprecated and will be removed: use {name} {renames[value]}"
            )
            value = renames[value]
        if eq == " ":
            out += [name, value]
        else:
            out.append(f"{name}{eq}{value}")
    return out, warnings


HELP_PANELS: dict[str, str] = {
    **dict.fromkeys(
        (
            "auditor",
            "target",
            "production_target",
            "judge",
            "realism_judge_spec",
            "namer",
            "target_prefill",
            "demo_model",
            "doc_model",
        ),
        "Models",
    ),  # fmt: skip
    **dict.fromkeys(
        ("max_retries", "timeout", "max_tokens", "temperature", "concurrency", "judge_cache", "followups"),
        "Model calls",
    ),
    **dict.fromkeys(
        (
            "tool_protocol",
            "tool_set",
            "auditor_prompt",
            "max_turns",
            "benign_max_turns",
            "production_max_turns",
            "token_budget",
            "rollouts",
            "random_seed",
            "seeds_per_behavior",
            "production_seeds",
            "plant_prompt",
        ),
        "Audits",
    ),  # fmt: skip
    **dict.fromkeys(("demo_tokens", "demo_prefill", "samples", "demonstrations_file"), "Demonstrations"),
    **dict.fromkeys(("steps", "batch_size", "rank", "epochs", "max_length"), "Training"),
    **dict.fromkeys(("redteam", "redteam_steps", "redteam_turns", "redteam_learning_rate", "beta"), "Red team"),
    **dict.fromkeys(("eval_samples", "eval_prompts", "eval_tokens"), "Evaluation"),
    **dict.fromkeys(("demo_temperature", "eval_temperature", "learning_rate"), "Rates"),  # long [0.0<=x<=...] types
    **dict.fromkeys(("behaviors_dir", "seeds_dir", "dimensions", "openings_file"), "Library"),
    **dict.fromkeys(("out", "on_existing", "html", "json_out", "inspect_log", "reference"), "Output"),
}
"""Where a long command's `--help` shows each shared option; options not named here stay under "Options"."""
LONG_COMMAND_OPTIONS = 12
"""A command with more options than this groups them into the panels of `HELP_PANELS`."""
SWITCHES = "Switches"
"""The panel of a long command's on/off pairs (`--x/--no-x`)."""
CHOICE_METAVAR_CHARS = 12
"""A list of choices longer than this is shown by its type (the option's help names them), so names are never cut."""


def arrange_help(command: Any) -> None:
    """Make a command's `--help` readable at 80 columns: long commands group their options into panels, and long
    lists of choices give way to a short metavar, so no option name is ever cut."""
    from typer.core import TyperOption

    options = [p for p in command.params if isinstance(p, TyperOption)]
    for option in options:
        described = option.type_descriptor
        if described.is_choice and len("|".join(map(str, described.choices or ()))) > CHOICE_METAVAR_CHARS:
            option.show_choices = False
        if len(options) > LONG_COMMAND_OPTIONS and getattr(option, "rich_help_panel", None) is None:
            # an on/off pair takes two name columns: beside long names and types they would not fit in 80
            panel = SWITCHES if option.secondary_opts else HELP_PANELS.get(option.name or "")
            option.rich_help_panel = panel
