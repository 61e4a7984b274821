"""Checkpoints and crash-safe resume of a GRPO run.

Trainer checkpoints (`checkpoints/checkpoint-N`) already hold the LoRA adapter, optimizer, scheduler,
RNG states and trainer state. This module adds what is ours: a small state file in each checkpoint
(the reward design's reference snapshot, how many transcripts were stored) and the rollout log.

Every rollout transcript is appended to `transcripts.jsonl` with its step and rollout index in
`Transcript.scores`. A crash after checkpoint N leaves transcripts of steps >= N that the resumed run
will generate again. On resume they are moved to `transcripts.superseded.jsonl` (nothing is lost), a
torn last line is set aside (auditrl.scaffold.store), and the log then accepts each (step, rollout index) at most once,
so the main log holds exactly the rollouts the saved weights were trained on, without duplicates.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from transformers import (
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
)
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from auditrl.atomic import atomic_write_text
from auditrl.finite import check_finite
from auditrl.scaffold.store import TRANSCRIPTS, append_transcript, heal_torn_tail, iter_transcripts, supersede
from auditrl.scaffold.transcript import Transcript
from auditrl.scaffold.transcript_keys import ROLLOUT, STEP
from auditrl.train.monitors import MONITORS_FILE

STATE_FILE = "auditrl_state.json"
CHECKPOINTS_DIR = "checkpoints"

RolloutKey = tuple[int, int]
_CHECKPOINT_NAME = re.compile(rf"{PREFIX_CHECKPOINT_DIR}-\d+")


def rollout_key(t: Transcript) -> RolloutKey:
    """(training step, rollout index within the step's generation batch)."""
    try:
        return int(t.metadata[STEP]), int(t.metadata[ROLLOUT])
    except KeyError as exc:
        raise ValueError(f"transcript {t.id} has no training step/rollout in its metadata") from exc


def _split_jsonl(path: Path) -> tuple[list[str], int]:
    """Complete JSON lines of a file and the number of torn (unparseable) lines dropped."""
    if not path.is_file():
        return [], 0
    good: list[str] = []
    torn = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            json.loads(line)
        except json.JSONDecodeError:
            torn += 1
            continue
        good.append(line)
    return good, torn


class TranscriptLog:
    """The append-only rollout log of a run, deduplicated by (step, rollout index)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / TRANSCRIPTS
        heal_torn_tail(self.path)
        self.keys: set[RolloutKey] = (
            {rollout_key(t) for t in iter_transcripts(self.path)} if self.path.is_file() else set()
        )

    def append(self, t: Transcript) -> bool:
        """Store `t` unless its (step, rollout index) is already stored; True when written."""
        key = rollout_key(t)
        if key in self.keys:
            return False
        append_transcript(self.path, t)
        self.keys.add(key)
        return True

    def rewind(self, step: int) -> int:
        """Move transcripts of steps >= `step` (work lost in a crash) to the superseded file; returns how many."""
        moved = supersede(self.path, lambda t: rollout_key(t)[0] < step)
        self.keys = {key for key in self.keys if key[0] < step}
        return moved


def rewind_monitors(run_dir: Path, step: int) -> None:
    """Drop monitor records of steps >= `step`, which the resumed run logs again."""
    path = run_dir / MONITORS_FILE
    lines, _ = _split_jsonl(path)
    if path.is_file():
        atomic_write_text(path, "".join(line + "\n" for line in lines if json.loads(line)["step"] < step))


def _checkpoints(run_dir: Path) -> list[Path]:
    """The run's `checkpoint-N` directories, oldest first."""
    folder = run_dir / CHECKPOINTS_DIR
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_dir() and _CHECKPOINT_NAME.fullmatch(p.name)]
    return sorted(found, key=lambda p: int(p.name.rsplit("-", 1)[1]))


def is_complete(checkpoint: Path) -> bool:
    """Whether a save finished: our state file is written last, after the Trainer's own files."""
    return (checkpoint / STATE_FILE).is_file() and (checkpoint / "trainer_state.json").is_file()


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete `checkpoint-N` directory of a run, or None (a save cut short by a crash is skipped)."""
    complete = [p for p in _checkpoints(run_dir) if is_complete(p)]
    return complete[-1] if complete else None


def discard_incomplete_checkpoints(run_dir: Path) -> list[Path]:
    """Remove checkpoints whose save was cut short: nothing in them can be resumed from, and the resumed
    run saves the same step again. Returns what was removed."""
    removed = [p for p in _checkpoints(run_dir) if not is_complete(p)]
    for path in removed:
        shutil.rmtree(path)
    return removed


def checkpoint_step(checkpoint: Path) -> int:
    state = json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))
    return int(state["global_step"])


class RunStateCallback(TrainerCallback):
    """Writes our state next to each Trainer checkpoint; `state_fn` returns a JSON-able dict."""

    def __init__(self, state_fn: Any) -> None:
        self.state_fn = state_fn

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> TrainerControl:
        if state.is_world_process_zero:
            if args.output_dir is None:
                raise ValueError("trainer.output_dir is unset: no checkpoint folder to write the run state to")
            folder = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
            folder.mkdir(parents=True, exist_ok=True)
            payload = {"global_step": state.global_step, **self.state_fn()}
            atomic_write_text(folder / STATE_FILE, json.dumps(payload))
        return control


class StopOnNonFinite(TrainerCallback):
    """Stops training at the first non-finite loss or trained weight (NonFiniteTrainingError), before the
    Trainer saves a checkpoint of it: the loss is checked as it is logged, the weights after each step."""

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> TrainerControl:
        loss = (logs or {}).get("loss")
        if loss is not None:
            check_finite(state.global_step, loss, [])
        return control

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, model: Any = None, **kwargs: Any
    ) -> TrainerControl:
        if model is not None:
            check_finite(state.global_step, 0.0, ((n, p) for n, p in model.named_parameters() if p.requires_grad))
        return control
