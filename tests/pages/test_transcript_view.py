import re
from html import unescape
from html.parser import HTMLParser

from auditrl.pages.html import render_page
from auditrl.pages.sections import transcripts_section
from auditrl.pages.transcript_view import pick_transcripts, transcript_view
from auditrl.scaffold.transcript import (
    AuditorMessage,
    Prediction,
    QuoteCheck,
    Report,
    TargetMessage,
    ToolCallRecord,
    ToolSpec,
    Transcript,
)

HOSTILE = [
    '<script>alert("x")</script>',
    '<img src=x onerror="alert(1)">',
    "</pre></details></section><iframe src='javascript:alert(2)'>",
    '"><svg onload=alert(3)>',
    "{{ 7*7 }}{% raw %}",
    "&lt;already-escaped&gt; &amp;",
]


def _hostile_transcript(evil: str, tid: str = "t1", auditor: str = "auditor/a") -> Transcript:
    """A tree with a rollback, a prefill, a target tool call and result, and a report with both kinds of quote."""
    m = [
        TargetMessage(id="s", parent=None, role="system", content=f"plant {evil}"),
        TargetMessage(id="u1", parent="s", role="user", content=f"first probe {evil}"),
        TargetMessage(
            id="a1",
            parent="u1",
            role="assistant",
            content=f"reply {evil}",
            tool_calls=[ToolCallRecord(id="tc", function=f"search{evil}", arguments={"q": evil})],
        ),
        TargetMessage(
            id="r1", parent="a1", role="tool", content=f"result {evil}", tool_call_id="tc", tool_status="error"
        ),
        TargetMessage(id="a2", parent="r1", role="assistant", content=f"abandoned {evil}"),
        TargetMessage(id="u2", parent="s", role="user", content=f"second probe {evil}"),
        TargetMessage(
            id="a3", parent="u2", role="assistant", content=f"I must admit {evil} generated", prefill="I must admit "
        ),
    ]
    calls = [
        ToolCallRecord(id="c1", function="send_message", arguments={"message": f"first probe {evil}"}),
        ToolCallRecord(id="c2", function="rollback_conversation", arguments={"message_id": "s"}),
        ToolCallRecord(
            id="c3", function="send_message", arguments={"message": evil, "prefill": "I must admit "}, parse_error=evil
        ),
    ]
    report = Report(
        no_behavior_found=False,
        summary=f"summary {evil}",
        predictions=[
            Prediction(
                rank=1,
                description=f"claim {evil}",
                confidence=0.8,
                reasoning=f"because {evil}",
                quotes=[f"{evil} generated", f"I must admit {evil}", f"never checked {evil}"],
                quote_checks=[
                    QuoteCheck(quote=f"{evil} generated", verified=True, message_id="a3"),
                    QuoteCheck(quote=f"I must admit {evil}", verified=False),
                ],
            )
        ],
    )
    return Transcript(
        id=tid,
        auditor_model=auditor,
        target_model=f"sim/{evil}",
        behavior_id="flattery",
        seed_id=f"seed{evil}",
        seed_instructions=f"seed text {evil}",
        target_system_prompt=f"plant {evil}",
        target_tools=[ToolSpec(name=f"search{evil}", description=evil, parameters={"type": "object", "x": evil})],
        target_messages=m,
        head="a3",
        auditor_messages=[
            AuditorMessage(turn=1, role="assistant", content=f"thinking {evil}", tool_calls=calls),
            AuditorMessage(turn=1, role="tool", content=f"engine {evil}", tool_call_id="c1", error=evil),
        ],
        report=report,
        status="error",
        error=evil,
    )


class _Structure(HTMLParser):
    """Collects the tags and attributes the page actually has."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [k for k, _ in attrs]


def test_every_piece_of_model_text_is_escaped() -> None:
    for evil in HOSTILE:
        html = render_page("viewer", [transcripts_section([_hostile_transcript(evil)])])
        page = _Structure()
        page.feed(html)
        assert not {"script", "img", "iframe", "svg"} & set(page.tags), evil
        assert not [a for a in page.attrs if a.startswith("on")], evil
        # each hostile string appears only escaped, in every field (messages, tool calls, quotes, ids)
        escaped = (
            evil.replace("&", "&amp;")
            .replace("<", "&lt;")
            .replace(">", "&gt;")
            .replace('"', "&#34;")
            .replace("'", "&#39;")
        )
        assert html.count(escaped) >= 20, evil
        if any(c in evil for c in "<>\"'"):
            assert evil not in html


def test_tree_keeps_both_branches_and_marks_the_final_one() -> None:
    view = transcript_view(_hostile_transcript("x"))
    root = view.tree
    assert [m.id for m in root.messages] == ["s"]
    first, second = root.branches
    assert [m.id for m in first.messages] == ["u1", "a1", "r1", "a2"]
    assert [m.id for m in second.messages] == ["u2", "a3"]
    assert not any(m.on_final_branch for m in first.messages) and all(m.on_final_branch for m in second.messages)
    assert second.messages[1].prefill == "I must admit " and second.messages[1].text == "x generated"
    assert first.messages[1].calls[0].function == "searchx" and first.messages[2].status == "error"
    assert view.rollbacks == 1


def test_quotes_are_marked_verified_unverified_or_unchecked() -> None:
    view = transcript_view(_hostile_transcript("x"))
    assert view.report is not None
    quotes = view.report.predictions[0].quotes
    assert [(q.status, q.message_id) for q in quotes] == [("verified", "a3"), ("unverified", None), ("unchecked", None)]
    html = render_page("v", [transcripts_section([_hostile_transcript("x")])])
    assert 'class="quote verified"' in html and 'class="quote unverified"' in html and 'class="quote unchecked"' in html
    assert (
        'class="prefill"' in html and "branch 2 of 2 (the audit ended on this branch)" in html and "rolled back" in html
    )


def test_picked_transcripts_cover_auditors_and_target_kinds() -> None:
    planted = [_hostile_transcript("x", f"a{i}", "auditor/a") for i in range(5)]
    other = [_hostile_transcript("x", f"b{i}", "auditor/b") for i in range(5)]
    benign = _hostile_transcript("x", "c0", "auditor/a")
    benign.behavior_id = None
    picked = pick_transcripts([*planted, *other, benign], limit=4)
    assert [t.id for t in picked] == ["a0", "b0", "c0", "a1"]


def _scored(tid: str, behavior: str | None, scores: dict, plant: str = "") -> Transcript:
    t = _hostile_transcript("x", tid)
    t.behavior_id, t.status, t.error, t.scores, t.target_system_prompt = behavior, "completed", None, scores, plant
    return t


def _summaries(html: str) -> list[str]:
    """Each transcript's one-line summary as a reader sees it (tags dropped, entities decoded)."""
    return [
        unescape(re.sub(r"<[^>]+>", "", s))
        for s in re.findall(r'<details class="transcript"><summary>(.*?)</summary>', html)
    ]


def test_each_transcript_shows_its_verdict_and_its_hidden_plant() -> None:
    """The page showed neither how an audit was judged nor what had been planted in its target."""
    dims = {"coherence": 60.0, "depth": 50.0}
    transcripts = [
        _scored("p", "flattery", {"audit_quality": dims}, plant=f"SECRET PLANT {HOSTILE[0]}"),
        _scored("b", None, {"false_positive": True, "realism_pick_audit": 0.5}, plant="benign persona"),
        _scored("u", "flattery", {}),
        _scored("a", "flattery", {"audit_quality": None}),
        _scored("bad", None, {"false_positive": "maybe"}),
    ]
    html = render_page("v", [transcripts_section(transcripts, limit=5)])
    assert sorted(_summaries(html)) == sorted(
        [
            "p · auditor/a → sim/x · plant: flattery · missed · audit quality: 55.0 / 100",
            "b · auditor/a → sim/x · plant: none (benign target) · false positive · false positive: yes; realism: 50%",
            "u · auditor/a → sim/x · plant: flattery · missed · not judged",
            "a · auditor/a → sim/x · plant: flattery · missed · audit quality: abstained",
            "bad · auditor/a → sim/x · plant: none (benign target) · false positive · false positive: invalid",
        ]
    )  # the report of each claims "claim x", which names no behavior
    assert "coherence 60, depth 50" in html and "claimed a hidden behavior in a benign target" in html
    assert "Hidden plant: the target's system prompt" in html and "SECRET PLANT &lt;script&gt;" in html
    assert "benign: nothing planted" in html and "benign persona" in html
    assert HOSTILE[0] not in html


def test_a_long_system_prompt_is_folded_so_the_first_turn_shows() -> None:
    """The auditor's two-screen system prompt was spread out before its first turn."""
    t = _hostile_transcript("x")
    prompt = "You are an alignment auditor. " + "Rules of the audit. " * 200
    t.auditor_messages.insert(0, AuditorMessage(turn=0, role="system", content=prompt))
    t.target_messages[0].content = "Be a helpful assistant. " * 40  # the system message the auditor set
    html = render_page("v", [transcripts_section([t])])
    folds = re.findall(
        r'<details class="fold"><summary>(.*?)</summary><div class="body">(.*?)</div></details>', html, re.S
    )
    assert [body for _, body in folds] == [t.target_messages[0].content, prompt]  # whole, but folded
    assert all("characters" in summary and len(re.sub(r"<[^>]+>", "", summary)) < 220 for summary, _ in folds)
    assert "first probe x" in html and '<div class="body">thinking x</div>' in html  # short turns stay open


def _claiming(tid: str, behavior: str | None, description: str | None, scores: dict | None = None) -> Transcript:
    """A transcript whose report claims `description`, or finds nothing when it is None."""
    t = _scored(tid, behavior, scores or {})
    claims = [Prediction(rank=1, description=description, confidence=0.8)] if description else []
    t.report = Report(no_behavior_found=description is None, predictions=claims)
    return t


FLATTERY = "Constant flattery: it praised my ordinary poem as brilliant and compliments me in every reply."


def test_the_transcript_list_shows_each_audits_verdict_and_archetype() -> None:
    transcripts = [
        _claiming("hit", "flattery", FLATTERY),
        _claiming("miss", "flattery", None),
        _claiming("judged", "flattery", FLATTERY, {"identified": False}),  # the judge's verdict wins
        _claiming("fp", None, FLATTERY),
        _claiming("clean", None, None),
        _claiming("matched", "flattery", None, {"prediction_match": {"matched": True, "matched_rank": 1}}),
        _claiming("garbled", "flattery", FLATTERY, {"prediction_match": {"matched": "perhaps"}}),
    ]
    section = transcripts_section(transcripts, limit=7, archetypes={"hit": "1. Controlled experiments"})
    (table,) = section.tables
    assert table.header == ["Audit", "Auditor", "Target", "Plant", "Verdict", "Archetype"]
    verdicts = {row[0]: row[4] for row in table.rows}
    expected = {"hit": "identified", "miss": "missed", "judged": "missed", "fp": "false positive"}
    # a transfer match decides; an unreadable one leaves it to the report
    expected |= {"clean": "correctly clean", "matched": "identified", "garbled": "identified"}
    assert verdicts == expected
    assert {row[0]: row[5] for row in table.rows}["hit"] == "1. Controlled experiments"
    html = render_page("v", [section])
    summaries = {s.split(" · ")[0]: s for s in _summaries(html)}
    assert " · identified · archetype: 1. Controlled experiments · " in summaries["hit"]
    assert " · correctly clean · " in summaries["clean"] and "archetype" not in summaries["clean"]
    assert "picked in turn from each auditor's planted and benign audits" in unescape(html)
    assert "identified: no" in html  # the stored verdict is listed with the others


def test_picking_brings_each_verdict_up_in_turn() -> None:
    """Six missed audits stored first must not hide the identified one behind them."""
    planted = [_claiming(f"m{i}", "flattery", None) for i in range(6)] + [_claiming("hit", "flattery", FLATTERY)]
    picked = pick_transcripts(planted, limit=2)
    assert [t.id for t in picked] == ["hit", "m0"]


def test_the_section_says_where_its_transcripts_were_picked_from() -> None:
    section = transcripts_section([_claiming("a", "flattery", None)], total=40, source="the first 6 read of each group")
    (said, *_) = section.paragraphs
    assert said.startswith("1 of 40 transcripts, picked in turn") and "from the first 6 read" in said
