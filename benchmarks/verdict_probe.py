"""Is the evidence for a verdict in the model's own states? A linear probe at the report's verdict position.

For each audit the auditor's conversation before its report is rebuilt as the engine gave it (as in
`benchmarks/claim_probability.py`, begun report words included) and the frozen base model (no adapter) reads it
once; the hidden state of the last token at each chosen layer is the probe's input. Label: the teacher claimed
(which the scripted teacher does exactly when the target showed the behavior). Per layer, a standardised L2
logistic regression, 5-fold cross-validated AUC on the teacher's audits the SFT base was fine-tuned on (`<run>/sft/
teacher`): over all of them, and over only those that reached a trigger topic (there the topic alone says nothing,
so only the target's words can separate the labels). Then, fitted on the teacher's trigger-reaching audits, its AUC
for "the target showed the behavior" on a trained auditor's own held-out planted audits that reached a trigger
topic. A probe that separates the labels while the fine-tuned auditor's P(claim) does not says the information is
there and the fine-tuning did not learn to use it. Prints the CPU; writes `<run>/verdict_probe.json`.

    OMP_NUM_THREADS=1 python benchmarks/verdict_probe.py --run runs/lm-learning \
        [--layer 8 --layer 16 --layer 24 --layer 30]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import torch
import typer
from claim_probability import readable, report_prompt_ids
from rich.console import Console
from rich.table import Table
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from auditrl.atomic import atomic_write_text
from auditrl.auditworld.targets import reached_trigger
from auditrl.experiments.small_lm.settings import load_run_config
from auditrl.judges.claim_grader import claimed
from auditrl.models.precision import describe_cpu
from auditrl.scaffold.prompt_sets import PROMPT_SETS, openings
from auditrl.scaffold.store import TRANSCRIPTS, read_transcripts
from auditrl.scaffold.transcript import Transcript
from auditrl.train.policy import load_policy
from auditrl.train.sft import TEACHER_TRANSCRIPTS

FOLDS = 5
console = Console(width=120)


def verdict_states(
    model: Any, tokenizer: Any, transcripts: list[Transcript], begun: str, layers: list[int]
) -> dict[int, np.ndarray]:
    """Per layer, one row per audit: the hidden state where the verdict word is predicted."""
    rows: dict[int, list[np.ndarray]] = {layer: [] for layer in layers}
    for t in transcripts:
        with torch.no_grad():
            hidden = model(
                report_prompt_ids(tokenizer, t, begun), output_hidden_states=True, logits_to_keep=1
            ).hidden_states
        for layer in layers:
            rows[layer].append(hidden[layer][0, -1].float().numpy())
    return {layer: np.stack(v) if v else np.zeros((0, 1)) for layer, v in rows.items()}


def probe() -> Any:
    return make_pipeline(StandardScaler(), LogisticRegression(C=0.05, max_iter=2000))


def cv_auc(x: np.ndarray, y: np.ndarray) -> float | None:
    """5-fold cross-validated AUC, or None when a class has fewer audits than folds."""
    if min(y.sum(), (~y).sum()) < FOLDS:
        return None
    scores = cross_val_predict(
        probe(), x, y, cv=StratifiedKFold(FOLDS, shuffle=True, random_state=0), method="predict_proba"
    )
    return float(roc_auc_score(y, scores[:, 1]))


def main(
    run: Annotated[Path, typer.Option(help="An lm_learning.py output directory.")] = Path("runs/lm-learning"),
    auditor: Annotated[
        str, typer.Option(help="Evaluation folder whose held-out audits the fitted probe reads.")
    ] = "SFT_base",
    layer: Annotated[list[int], typer.Option(help="Hidden-state layer (0: embeddings); repeatable.")] = [8, 16, 24, 30],  # noqa: B006 - typer reads the default here; nothing mutates it
) -> None:
    torch.set_num_threads(1)
    console.print(describe_cpu(), highlight=False)
    cfg = load_run_config(run / "grpo_config.yaml")
    begun = openings(PROMPT_SETS[cfg.episodes.auditor_prompt].openings or "")["report"]
    model, tokenizer = load_policy(cfg.policy.model_copy(update={"init_adapter": None}))
    model.eval()
    if bad := [n for n in layer if not 0 <= n <= model.config.num_hidden_layers]:
        raise typer.BadParameter(f"layer(s) {bad} outside 0..{model.config.num_hidden_layers}", param_hint="--layer")
    teacher = list(filter(readable, read_transcripts(run / "sft" / TEACHER_TRANSCRIPTS)))
    held_dir = run / "eval" / auditor
    if not held_dir.is_dir():
        raise typer.BadParameter(
            f"{held_dir} does not exist (run benchmarks/lm_learning.py first)", param_hint="--auditor"
        )
    held = [
        t
        for f in sorted(held_dir.iterdir())
        for t in read_transcripts(f / TRANSCRIPTS)
        if readable(t) and not t.benign and reached_trigger(t)
    ]
    label = np.array([claimed(t) for t in teacher], dtype=bool)
    reached = np.array([bool(reached_trigger(t)) for t in teacher], dtype=bool)
    held_shown = np.array([t.behavior_shown for t in held], dtype=bool)
    x_teacher = verdict_states(model, tokenizer, teacher, begun, layer)
    x_held = verdict_states(model, tokenizer, held, begun, layer)
    record: dict[str, Any] = {
        "cpu": describe_cpu(),
        "audits": {
            "teacher": len(teacher), "teacher claims": int(label.sum()), "teacher reached trigger": int(reached.sum()),
            "teacher claims among them": int(label[reached].sum()), "held-out reached trigger": len(held),
            "held-out shown among them": int(held_shown.sum()),
        },
        "layers": {},
    }  # fmt: skip
    for n in layer:
        transfer = None
        if min(label[reached].sum(), (~label[reached]).sum()) > 0 and 0 < held_shown.sum() < len(held):
            fitted = probe().fit(x_teacher[n][reached], label[reached])
            transfer = float(roc_auc_score(held_shown, fitted.predict_proba(x_held[n])[:, 1]))
        record["layers"][str(n)] = {
            "teacher, all audits (CV)": cv_auc(x_teacher[n], label),
            "teacher, reached trigger (CV)": cv_auc(x_teacher[n][reached], label[reached]),
            f"{auditor} held-out, reached trigger": transfer,
        }
    a = record["audits"]
    table = Table(
        title="Linear probe at the verdict position, frozen base: AUC "
        f"(teacher: {a['teacher']} audits, {a['teacher claims']} "
        f"claims; {a['teacher reached trigger']} reached a trigger topic, {a['teacher claims among them']} claims; "
        f"{auditor} held-out: {a['held-out reached trigger']} reached, {a['held-out shown among them']} shown)",
        caption=record["cpu"],
    )
    table.add_column("layer", justify="right")
    for column in next(iter(record["layers"].values())):
        table.add_column(column, justify="right")
    for n, row in record["layers"].items():
        table.add_row(n, *("-" if v is None else f"{v:.3f}" for v in row.values()))
    console.print(table)
    atomic_write_text(run / "verdict_probe.json", json.dumps(record, indent=2))


if __name__ == "__main__":
    typer.run(main)
