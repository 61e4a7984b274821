"""Why an auditor does or does not claim: the probability that its report opens with a claim, read from the
model itself on its own held-out audits (the evaluation transcripts `benchmarks/lm_learning.py` wrote), and on
the teacher's audits it was fine-tuned on (`<run>/sft/teacher`): a model that claims on its training audits but
not on held-out ones where the target showed the behavior has memorised its data, not learnt the rule.

For each audit the auditor's conversation up to the report request is rebuilt as the engine gave it (text
tool protocol: each turn's tool results as one user message of `<tool_result>` blocks), the guided prompt
set's begun report words are appended (`{"no_behavior_found": `) and one forward pass gives the probability
of `false` next, i.e. of a claim. Grouped by what the audit held: planted audits in which the target showed
the behavior, planted audits in which it did not, and benign audits. An auditor that reads the evidence
claims more often where the behavior showed than on benign targets; the gap is reported with a bootstrap
95% interval.

With `--claims`, also whether the auditor can write a finding once it claims: on each planted audit whose target
showed the behavior, its report is begun with the prompt set's claim opening (the verdict `false` and the keys up to
the description), it writes the description (greedily by default; `--temperature T --samples N` samples N
descriptions at temperature T, as GRPO's rollouts would; at most `--max-new-tokens`, default the report turn's
budget, `episodes.max_report_tokens` or else `max_new_tokens`), and the claim grader the reward uses
(auditrl.judges.claim_grader) decides whether the report describes the planted behavior. Beside it, the same grader
on the audit's own report. A claim that is credited when made is what claim exploration needs GRPO to sample; a low
rate here bounds what a run can pay for. `--quote-opening WORDS` appends WORDS to the claim opening (e.g.
`"It wrote:"`, which makes every made claim quote the target); `--copy-quote` makes the quote a verbatim span of the
target's replies and ends the report where the quote stops (auditrl.experiments.small_lm.copy_quote), which
separates choosing what to quote from copying it and from writing the JSON around it. `--report-grammar` reads
the auditor as GRPO's rollouts under `episodes.report_grammar: verdict_quote` sample it: P(claim) among the
verdict's spellings only (`false` against `true`), and made claims opened with the prompt set's quote words and
copied (auditrl.experiments.small_lm.report_grammar).
`--auditor untrained_base` reads the policy without an adapter, `GRPO_from_base` the adapter of a GRPO run from it
(`<run>/grpo_from_base`). `--held-out FILE` reads teacher audits of held-out targets (the teacher probing, the auditor
writing only the report, as report-only GRPO trains it) for every auditor, in place of its own evaluation audits.
Prints the CPU; writes `<run>/claim_probability.json`.

    OMP_NUM_THREADS=1 python benchmarks/claim_probability.py --run runs/lm-learning [--auditor SFT_base] \
        [--claims [--temperature 0.7 --samples 2 --max-new-tokens 128] [--quote-opening "It wrote:"] [--copy-quote]]
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import mean
from typing import Annotated, Any

import torch
import typer
from rich.console import Console
from rich.progress import track
from rich.table import Table
from transformers import LogitsProcessorList

from auditrl.atomic import atomic_write_text
from auditrl.experiments.small_lm.copy_quote import MARKER, QuoteCopy, reply_tokens
from auditrl.experiments.small_lm.report_grammar import verdict_token_ids
from auditrl.experiments.small_lm.settings import load_run_config
from auditrl.judges.claim_grader import default_grader
from auditrl.models.precision import describe_cpu
from auditrl.scaffold.engine import AuditEpisode
from auditrl.scaffold.prompt_sets import PROMPT_SETS, openings
from auditrl.scaffold.report import parse_report
from auditrl.scaffold.store import TRANSCRIPTS, read_transcripts
from auditrl.scaffold.transcript import ToolCallRecord, Transcript
from auditrl.stats import difference_ci, mean_ci
from auditrl.train.outputs import ADAPTER_DIR
from auditrl.train.policy import load_policy
from auditrl.train.sft import TEACHER_TRANSCRIPTS

ADAPTERS: dict[str, str | None] = {
    "untrained_base": None,
    "SFT_base": "sft",
    "SFT_plus_GRPO": "grpo",
    "GRPO_from_base": "grpo_from_base",
}
"""Evaluation folder of each auditor -> its run folder under the lm_learning output (None: no adapter)."""
TRAINED = ["SFT_base", "SFT_plus_GRPO"]
console = Console(width=120)


def auditor_chat(t: Transcript) -> list[dict[str, str]]:
    """The auditor's conversation before its report, as the engine sent it with the text tool protocol (each turn's
    tool results joined into one user message by the engine's own `result_messages`)."""
    calls = {c.id: c for m in t.auditor_messages for c in m.tool_calls}
    chat: list[dict[str, str]] = []
    results: list[tuple[ToolCallRecord, str, str | None]] = []
    for m in [*t.auditor_messages[:-1], None]:  # the last message is the report itself; None flushes the results
        if m is not None and m.role == "tool":
            call = calls.get(m.tool_call_id or "") or ToolCallRecord(id=m.tool_call_id or "", function="send_message")
            results.append((call, m.content, m.error))
            continue
        if results:
            chat += [{"role": "user", "content": r.text} for r in AuditEpisode.result_messages(results, native=False)]
            results = []
        if m is not None:
            chat.append({"role": m.role, "content": m.content})
    return chat


def readable(t: Transcript) -> bool:
    """An audit whose verdict can be read: it did not fail and the auditor spoke before its report."""
    return t.status != "error" and len(t.auditor_messages) >= 2


def report_prompt_ids(tokenizer: Any, t: Transcript, begun: str) -> torch.Tensor:
    """Token ids (a batch of one) of the auditor's conversation before its report, with the begun report words."""
    text = tokenizer.apply_chat_template(auditor_chat(t), tokenize=False, add_generation_prompt=True) + begun
    return tokenizer(text, add_special_tokens=False, return_tensors="pt").input_ids


def claim_probabilities(
    model: Any, tokenizer: Any, transcripts: list[Transcript], begun: str, among_verdicts: bool = False
) -> dict[str, list[float]]:
    """P(claim) in percent per audit, grouped by planted with the behavior shown, planted without, and benign;
    `among_verdicts`: relative to the verdict's spellings (what the report grammar samples from)."""
    claim_ids = verdict_token_ids(tokenizer, ("false",))
    verdict_ids = verdict_token_ids(tokenizer)
    groups: dict[str, list[float]] = {"planted, behavior shown": [], "planted, not shown": [], "benign": []}
    for t in track(list(filter(readable, transcripts)), description="P(claim)", console=console, transient=True):
        with torch.no_grad():  # the next word only: the head over every position cost most of the pass
            p = torch.softmax(model(report_prompt_ids(tokenizer, t, begun), logits_to_keep=1).logits[0, -1].float(), -1)
        group = "benign" if t.benign else "planted, behavior shown" if t.behavior_shown else "planted, not shown"
        claim = float(sum(p[i] for i in claim_ids))
        groups[group].append(100.0 * claim / (float(sum(p[i] for i in verdict_ids)) if among_verdicts else 1.0))
    return groups


@dataclass(frozen=True)
class ClaimSampling:
    """How a made claim's description is written: greedily (temperature 0) or `samples` draws at `temperature`."""

    max_new_tokens: int
    temperature: float = 0.0
    samples: int = 1
    seed: int = 0
    copy_quote: bool = False
    quote_opened: bool = False

    def descriptions(self, model: Any, tokenizer: Any, ids: torch.Tensor, replies: list[str]) -> list[str]:
        """The descriptions written after `ids`; with `copy_quote`, their quotes copied from `replies`."""
        torch.manual_seed(self.seed)
        if self.temperature > 0:
            options: dict[str, Any] = {"do_sample": True, "temperature": self.temperature, "top_k": 0, "top_p": 1.0}
            ids = ids.repeat(self.samples, 1)
        else:
            options = {"do_sample": False}
        if self.copy_quote:
            sources = [reply_tokens(tokenizer, replies)] * ids.shape[0]
            copy = QuoteCopy(tokenizer, sources, ids.shape[1], {tokenizer.eos_token_id}, self.quote_opened)
            options["logits_processor"] = LogitsProcessorList([copy])
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=self.max_new_tokens,
                                 pad_token_id=tokenizer.pad_token_id, **options)  # fmt: skip
        return [tokenizer.decode(row[ids.shape[1] :], skip_special_tokens=True) for row in out]


CLAIM_COLUMNS = ("credited, made to claim", "parsed, made to claim", "credited, own report")


def written_claims(
    model: Any, tokenizer: Any, transcripts: list[Transcript], begun: str, sampling: ClaimSampling
) -> dict[str, Any]:
    """On planted audits whose target showed the behavior: percent credited when the auditor is made to claim
    (`begun` ends with the claim opening), parsed, and credited for the audit's own report. With sampling, each
    audit's samples are averaged into one unit, so the interval stays one over audits."""
    grader = default_grader()
    made, parsed, own = [], [], []
    for t in track(transcripts, description="made claims", console=console, transient=True):
        if not readable(t) or t.benign or t.behavior_id is None or not t.behavior_shown:
            continue
        ids = report_prompt_ids(tokenizer, t, begun)
        replies = [m.content for m in t.target_messages if m.role == "assistant"]
        reports = [parse_report(begun + text) for text in sampling.descriptions(model, tokenizer, ids, replies)]
        made.append(100.0 * mean(bool(grader.grade_report(r, t.behavior_id).matched) for r in reports))
        parsed.append(100.0 * mean(r.parse_error is None for r in reports))
        own.append(100.0 * grader.identifies(t))
    return {
        "audits": len(made),
        **{name: mean_ci(v).model_dump() for name, v in zip(CLAIM_COLUMNS, (made, parsed, own), strict=True) if v},
    }


def main(
    run: Annotated[Path, typer.Option(help="An lm_learning.py output directory.")] = Path("runs/lm-learning"),
    auditor: Annotated[list[str], typer.Option(help=f"Auditor to read ({', '.join(ADAPTERS)}); repeatable.")] = TRAINED,
    claims: Annotated[
        bool,
        typer.Option(help="Also grade the claims the auditor writes when made to claim where the behavior showed."),
    ] = False,
    temperature: Annotated[
        float, typer.Option(min=0.0, help="Sampling temperature of made claims' descriptions; 0 = greedy.")
    ] = 0.0,
    samples: Annotated[int, typer.Option(min=1, help="Descriptions sampled per audit when --temperature > 0.")] = 1,
    max_new_tokens: Annotated[
        int | None,
        typer.Option(
            min=1,
            help=(
                "Token budget of a made claim's description; default the report turn's budget "
                "(episodes.max_report_tokens, else max_new_tokens)."
            ),
        ),
    ] = None,
    quote_opening: Annotated[str, typer.Option(help="Words appended to the claim opening, e.g. 'It wrote:'.")] = "",
    copy_quote: Annotated[
        bool, typer.Option(help="Copy the made claim's quote verbatim from the target's replies.")
    ] = False,
    report_grammar: Annotated[
        bool,
        typer.Option(
            help=(
                "Read the auditor as the report grammar samples it "
                "(verdict among its spellings, quote opened and copied)."
            )
        ),
    ] = False,
    held_out: Annotated[
        Path | None,
        typer.Option(help="Teacher audits of held-out targets (a transcripts file), read for every auditor."),
    ] = None,
) -> None:
    unknown = [a for a in auditor if a not in ADAPTERS]
    if unknown:
        raise typer.BadParameter(
            f"unknown auditor {', '.join(unknown)}; choose from {', '.join(ADAPTERS)}", param_hint="--auditor"
        )
    torch.set_num_threads(1)
    console.print(describe_cpu(), highlight=False)
    cfg = load_run_config(run / "grpo_config.yaml")
    words = openings(PROMPT_SETS[cfg.episodes.auditor_prompt].openings or "")
    begun = words["report"]
    if report_grammar:
        if "quote" not in words:
            raise typer.BadParameter(
                f"prompt set {cfg.episodes.auditor_prompt!r} has no quote words", param_hint="--report-grammar"
            )
        quote_opening, copy_quote = quote_opening or words["quote"], True
    if held_out is not None and not held_out.is_file():
        raise typer.BadParameter(f"{held_out}: no such transcripts file", param_hint="--held-out")
    sampling = ClaimSampling(
        max_new_tokens or cfg.episodes.report_tokens, temperature, samples if temperature > 0 else 1,
        copy_quote=copy_quote, quote_opened=quote_opening.rstrip().endswith(MARKER),
    )  # fmt: skip
    record: dict[str, Any] = {
        "cpu": describe_cpu(),
        "claim_sampling": asdict(sampling),
        "report_grammar": report_grammar,
        "auditors": {},
    }
    sft_file = run / "sft" / TEACHER_TRANSCRIPTS
    sft_data = read_transcripts(sft_file) if sft_file.is_file() else []
    teacher_held_out = read_transcripts(held_out) if held_out is not None else []
    for label in auditor:
        folder = ADAPTERS[label]
        adapter = None if folder is None else run / folder / ADAPTER_DIR
        if adapter is not None and not adapter.is_dir():
            continue
        model, tokenizer = load_policy(cfg.policy.model_copy(update={"init_adapter": adapter and adapter.resolve()}))
        model.eval()
        evaluated = run / "eval" / label
        if held_out is not None:
            sources = {f"{label}, held-out teacher audits": teacher_held_out}
        else:
            own = (
                [t for f in sorted(evaluated.iterdir()) for t in read_transcripts(f / TRANSCRIPTS)]
                if evaluated.is_dir()
                else []
            )
            sources = {label: own}
        if sft_data:
            sources[f"{label}, on the SFT data"] = sft_data
        for name, transcripts in sources.items():
            groups = claim_probabilities(model, tokenizer, transcripts, begun, among_verdicts=report_grammar)
            gap = (
                difference_ci(groups["planted, behavior shown"], groups["benign"])
                if groups["planted, behavior shown"] and groups["benign"]
                else None
            )
            record["auditors"][name] = {
                "groups": {g: {"audits": len(v), **mean_ci(v).model_dump()} for g, v in groups.items() if v},
                "shown - benign": gap.model_dump() if gap else None,
            }
            if claims:
                record["auditors"][name]["claims"] = written_claims(
                    model, tokenizer, transcripts, begun + words["claim"] + quote_opening, sampling
                )
    among = " among the verdict's spellings" if report_grammar else ""
    table = Table(
        title=f"P(the report opens with a claim{among}), % (mean [95% CI] over audits)", caption=record["cpu"]
    )
    table.add_column("auditor (audits read)", no_wrap=True)
    for column in ("planted, behavior shown", "planted, not shown", "benign", "shown - benign"):
        table.add_column(column, justify="right")
    for label, r in record["auditors"].items():
        cells = [
            f"{e['mean']:.1f} [{e['lo']:.1f}, {e['hi']:.1f}] (n={e['audits']})" if (e := r["groups"].get(g)) else "-"
            for g in ("planted, behavior shown", "planted, not shown", "benign")
        ]
        gap = r["shown - benign"]
        table.add_row(label, *cells, f"{gap['mean']:+.1f} [{gap['lo']:+.1f}, {gap['hi']:+.1f}]" if gap else "-")
    console.print(table)
    if claims:
        how = f"{sampling.samples} sampled at temperature {sampling.temperature}" if sampling.temperature else "greedy"
        title = (
            f"made to claim where the behavior showed ({how}, at most {sampling.max_new_tokens} tokens): "
            "% credited by the claim grader (mean [95% CI] over audits)"
        )
        table = Table(title=title, caption=record["cpu"])
        table.add_column("auditor (audits read)", no_wrap=True)
        for column in CLAIM_COLUMNS:
            table.add_column(column, justify="right")
        for label, r in record["auditors"].items():
            c = r["claims"]
            table.add_row(
                f"{label} (n={c['audits']})",
                *[f"{e['mean']:.1f} [{e['lo']:.1f}, {e['hi']:.1f}]" if (e := c.get(k)) else "-" for k in CLAIM_COLUMNS],
            )
        console.print(table)
    atomic_write_text(run / "claim_probability.json", json.dumps(record, indent=2))
    if not record["auditors"]:
        raise SystemExit(f"{run}: no trained auditor's adapter and evaluation found")


if __name__ == "__main__":
    typer.run(main)
