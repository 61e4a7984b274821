"""What a finished `grpo_lm` run leaves behind and how to use it: a portable adapter (its base model
recorded by name, never as a path of the training machine), where its page and logs are, and the command that
evaluates the trained auditor (its page is written by auditrl.pages.training)."""

from __future__ import annotations

from pathlib import Path

from auditrl.models.local import ALIASES, set_adapter_base
from auditrl.scaffold.store import TRANSCRIPTS
from auditrl.train.config import GRPOLMConfig, PolicySettings
from auditrl.train.monitors import MONITORS_FILE

ADAPTER_DIR = "adapter"
PAGE_FILE = "report.html"


def portable_base(settings: PolicySettings) -> str:
    """The base model as the config names it (`smollm2`, a hub id, or a path the user wrote), for `local/`."""
    if settings.gguf_file and settings.model not in ALIASES:
        return str(Path(settings.model) / settings.gguf_file)
    return settings.model


def finalize_adapter(adapter_dir: Path, settings: PolicySettings) -> None:
    """Make a saved adapter loadable as `local/<adapter_dir>` on any machine."""
    set_adapter_base(adapter_dir, portable_base(settings))


def run_outputs(run_dir: Path) -> dict[str, Path]:
    """Where a finished run's products are."""
    return {
        "adapter": run_dir / ADAPTER_DIR,
        "transcripts": run_dir / TRANSCRIPTS,
        "monitors": run_dir / MONITORS_FILE,
        "page": run_dir / PAGE_FILE,
    }


def evaluate_command(run_dir: Path, cfg: GRPOLMConfig) -> str:
    """The command that runs the held-out suite on the trained adapter with the training episode settings."""
    target = cfg.episodes.target_model.replace("{family}", cfg.episodes.families[0])
    turns = cfg.episodes.max_turns
    return (
        f"auditrl suite --auditor local/{run_dir / ADAPTER_DIR} --target {target} --judge programmatic "
        f"--max-turns {turns} --benign-max-turns {turns} --max-tokens {cfg.episodes.max_new_tokens} "
        f"--production-seeds 0 --auditor-prompt {cfg.episodes.auditor_prompt} --out {run_dir / 'suite'}"
    )
