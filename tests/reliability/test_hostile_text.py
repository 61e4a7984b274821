"""Hostile model text and a canary API key, through a whole suite run over real HTTP.

A scripted auditor and target on the loopback server write XSS and code-injection payloads into every
piece of text they produce (messages, prefills, a created tool, tool calls and results, the report).
The suite, evaluate and strategies commands write their HTML pages from those transcripts; each
report is opened in headless chromium and no script may run. Nothing may execute the injected code,
and the API key in the environment may appear in no file, output or log line: the scan covers the
suite's files, the members of its Inspect logs (.eval zips, decompressed) and the TensorBoard events
of a training step against the same API (decoded event by event).
"""

from __future__ import annotations

import logging
import re
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest
from crash_lm_child import crash_config  # also puts the trainer tests' fakes on the path
from hostile_models import HostileText, hostile_auditor, hostile_target
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from train_fakes import LengthDesign, tiny_policy
from typer.testing import CliRunner

from auditrl.cli import app
from auditrl.scaffold.store import TRANSCRIPTS, read_run, read_transcripts
from auditrl.testing.openai_server import OpenAIServer, ReceivedRequest
from auditrl.train.grpo import train_run

CANARY = "sk-canary-9f3b1c7e5d2a4b6c8e0f1a3b5c7d9e1f"
PWNED = "data-pwned"
REPORTS = ("suite", "evaluate", "strategies")
"""Every command that writes an HTML page from transcripts."""
ACTIVE_TAGS = frozenset(
    {"script", "iframe", "svg", "math", "object", "embed", "base", "video", "input", "textarea", "form"}
)
"""Elements a report never needs and hostile text would bring (images are checked separately: plots only)."""


@dataclass
class HostileRun:
    root: Path
    reports: dict[str, Path]
    output: str
    log: str
    marker: Path
    hostile: HostileText
    requests: list[ReceivedRequest]


def _train_against(server: OpenAIServer, run: Path, tokenizer_dir: Path) -> None:
    """One GRPO step of the tiny policy whose target is `server`, logging to TensorBoard."""
    cfg = crash_config()
    cfg = cfg.model_copy(
        update={
            "episodes": cfg.episodes.model_copy(update={"target_model": server.model_spec("target")}),
            "trainer": cfg.trainer.model_copy(update={"max_steps": 1, "report_to": ["tensorboard"]}),
        }
    )
    train_run(cfg, run, design=LengthDesign(), policy=tiny_policy(tokenizer_dir), progress=False)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory, tokenizer_dir: Path) -> Iterator[HostileRun]:
    root = tmp_path_factory.mktemp("hostile")
    marker = root / "executed-model-text"
    hostile = HostileText.load(marker)
    runner = CliRunner()
    outputs: list[str] = []
    handler = logging.StreamHandler(stream := _Buffer())
    logging.getLogger().addHandler(handler)
    level = logging.getLogger().level
    logging.getLogger().setLevel(logging.DEBUG)
    with (
        pytest.MonkeyPatch.context() as env,
        OpenAIServer(responder=hostile_auditor(hostile), api_key=CANARY) as auditor,
        OpenAIServer(responder=hostile_target(hostile), api_key=CANARY) as target,
    ):
        for key, value in {**auditor.environ(), **target.environ()}.items():
            env.setenv(key, value)
        for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GOOGLE_API_KEY"):
            env.setenv(name, CANARY)
        run = root / "suite"
        commands = {
            "suite": ["suite", "--auditor", auditor.model_spec("auditor"), "--target", target.model_spec("target"),
                      "--judge", "programmatic", "--rollouts", "1", "--seeds-per-behavior", "1",
                      "--production-seeds", "1", "--max-turns", "7", "--benign-max-turns", "7",
                      "--production-max-turns", "7", "--concurrency", "8",
                      "--out", str(run), "--html", str(root / "suite.html")],
            "export": ["export", str(run)],
            "evaluate": ["evaluate", str(run), "--html", str(root / "evaluate.html"),
                         "--json", str(root / "evaluate.json")],
            "strategies": ["strategies", str(run), "--embedder", "tfidf", "--k", "2",
                           "--html", str(root / "strategies.html"), "--json", str(root / "strategies.json")],
        }  # fmt: skip
        for name, args in commands.items():
            result = runner.invoke(app, args, env={"COLUMNS": "200"})
            outputs.append(result.output)
            assert result.exit_code == 0, f"{name}: {result.output[-3000:]}"
        _train_against(target, root / "train", tokenizer_dir)
        requests = [*auditor.requests, *target.requests]
    logging.getLogger().removeHandler(handler)
    logging.getLogger().setLevel(level)  # at DEBUG, pytest would keep every later test's request logs in memory
    reports = {name: root / f"{name}.html" for name in REPORTS}
    yield HostileRun(root, reports, "\n".join(outputs), stream.text, marker, hostile, requests)


class _Buffer:
    def __init__(self) -> None:
        self.text = ""

    def write(self, s: str) -> None:
        self.text += s

    def flush(self) -> None:
        """Nothing buffered."""


class _Elements(HTMLParser):
    """Every start tag and its attributes, as a browser's tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _files(root: Path) -> Iterator[tuple[str, bytes]]:
    """Every file below `root`, with zip archives (Inspect's .eval logs) opened member by member."""
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                for member in archive.namelist():
                    yield f"{path}!{member}", archive.read(member)
        else:
            yield str(path), path.read_bytes()


@pytest.mark.slow
def test_the_run_carried_hostile_text_everywhere(hostile_run: HostileRun) -> None:
    transcripts = read_run(hostile_run.root / "suite").transcripts
    assert len(transcripts) == 13 and all(t.status != "error" for t in transcripts)
    payload = hostile_run.hostile.xss[0]
    for t in transcripts:
        assert payload in t.report.predictions[0].description
        assert any(payload in m.content for m in t.target_said())
        assert any(call.function == "run_shell" for m in t.target_messages for call in m.tool_calls)
        assert any(m.role == "tool" and payload in m.content for m in t.target_messages)


@pytest.mark.slow
@pytest.mark.parametrize("report", REPORTS)
def test_no_script_runs_in_a_report_opened_in_chromium(
    hostile_run: HostileRun, report: str, render_dom: Callable[[Path], str]
) -> None:
    page = hostile_run.reports[report]
    html = page.read_text(encoding="utf-8")
    assert html.count("&lt;script&gt;document.documentElement") >= 3, "the hostile text is not in the report"
    parser = _Elements()
    parser.feed(html)
    assert [tag for tag, _ in parser.tags if tag in ACTIVE_TAGS] == []
    assert all(
        (attrs.get("src") or "").startswith("data:image/png;base64,") for tag, attrs in parser.tags if tag == "img"
    )
    assert [(tag, name) for tag, attrs in parser.tags for name in attrs if name.startswith("on")] == []
    assert not any((attrs.get("href") or "").strip().lower().startswith("javascript:") for _, attrs in parser.tags)
    dom = render_dom(page)
    assert "<html" in dom and "&lt;script&gt;" in dom, "chromium did not render the report"
    assert PWNED not in dom
    # the rendered transcript list shows what each audit came to (and, where strategies were computed, its archetype)
    outcome = r'<span class="outcome [^"]*">(identified|missed|false positive|correctly clean|no readable report)<'
    assert re.search(outcome, dom)
    assert ('<span class="archetype">archetype: ' in dom) == (report == "strategies")


@pytest.mark.slow
def test_model_text_is_never_executed(hostile_run: HostileRun) -> None:
    assert not hostile_run.marker.exists()
    for page in hostile_run.reports.values():
        html = page.read_text(encoding="utf-8")
        assert "{{7*7}}" in html and "${{7*7}}" in html  # template syntax shown, not evaluated


def _events(root: Path) -> Iterator[tuple[Path, str]]:
    """Every TensorBoard event below `root`, decoded and printed in protobuf text form."""
    for path in sorted(root.rglob("events.out.tfevents.*")):
        for event in EventFileLoader(str(path)).Load():
            yield path, str(event)


@pytest.mark.slow
def test_the_canary_key_was_used_but_never_written(hostile_run: HostileRun) -> None:
    assert any(r.headers.get("authorization") == f"Bearer {CANARY}" for r in hostile_run.requests)
    files = list(_files(hostile_run.root))
    assert [name for name, data in files if CANARY.encode() in data] == []
    assert CANARY not in hostile_run.output and CANARY not in hostile_run.log
    inspect_members = [data for name, data in files if ".eval!" in name]
    assert any(b"[auditor turn 2]" in data for data in inspect_members), "the Inspect logs' members were not read"
    train = hostile_run.root / "train"
    assert len(read_transcripts(train / TRANSCRIPTS)) > 0, "the training step made no rollout against the API"
    events = list(_events(train))
    assert {path.parent.name for path, _ in events} >= {"monitors"}, "no TensorBoard events of the monitors"
    assert any('plugin_name: "scalars"' in text for _, text in events), "no scalars in the TensorBoard events"
    assert any("string_val" in text for _, text in events), (
        "no text (the trainer's arguments) in the TensorBoard events"
    )
    assert [str(path) for path, text in events if CANARY in text] == []
