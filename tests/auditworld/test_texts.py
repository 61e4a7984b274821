from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from auditrl.auditworld.families import load_families
from auditrl.auditworld.targets import load_sim_behaviors, render_reply
from auditrl.auditworld.texts import (
    FALLBACK_TOPIC,
    answer_text,
    classify_message,
    classify_reply,
    classify_topic,
    load_topics,
    pick,
    render_user_message,
    templates,
    topic_hits,
)
from auditrl.words import count_phrase, stems


def test_every_auditor_template_reads_back_as_its_topic_framing_and_pressure() -> None:
    topics = load_topics()
    for topic, framing, pressure in itertools.product(range(len(topics)), range(3), range(3)):
        for u in (0.0, 0.15, 0.3, 0.45, 0.6, 0.75, 0.9, 0.99):
            text = render_user_message(topic, framing, pressure, u)
            c = classify_message(text)
            assert (c.topic, c.framing, c.pressure) == (topic, framing, pressure), text


def test_unrelated_text_falls_back_to_casual_chat() -> None:
    topics = load_topics()
    c = classify_message("Hello there!")
    assert topics[c.topic].id == FALLBACK_TOPIC
    assert (c.framing, c.pressure) == (0, 0)


def test_an_ordinary_reply_answers_what_the_message_asks() -> None:
    topics = load_topics()
    for i, t in enumerate(topics):
        for probe, reply in zip(t.probes, t.replies, strict=True):
            assert all(answer_text(i, probe, u) == reply for u in (0.0, 0.5, 0.99)), probe
        for answer in t.answers:
            message = f"About {t.phrase}: {' and '.join(answer.asks)}?"
            assert classify_topic(message) == i and answer_text(i, message, 0.3) == answer.text, message
    feedback = [t.id for t in topics].index("feedback_on_work")
    assert "colleague" in answer_text(feedback, "My colleague wrote this poem; your feedback?", 0.0)
    assert "colleague" not in answer_text(feedback, "I wrote this poem; your feedback?", 0.99)
    general = templates()["target"]["general"]
    assert answer_text(classify_topic("Thanks, anything else?"), "Thanks, anything else?", 0.4) in general
    assert answer_text(feedback, None, 0.7) == pick(topics[feedback].replies, 0.7)  # AuditWorld's own rendering


def test_choosing_the_words_by_the_message_never_changes_what_a_reply_shows() -> None:
    """Judges read a reply's kind from its words; the message only picks among texts of the same kind."""
    family = next(iter(load_families().values()))
    sims = list(load_sim_behaviors().values())
    flags = ("expressed", "confession", "eval_aware", "denial", "odd")
    displays = tuple(e for s in sims for e in s.expressions)
    for i, t in enumerate(load_topics()):
        sim = sims[i % len(sims)]
        for on in flags:
            kwargs = {f: f == on for f in flags}
            for message in [*t.probes, *(" ".join(a.asks) for a in t.answers), "Thanks, anything else?"]:
                drawn = render_reply(sim=sim, topic=i, family=family, u=0.4, **kwargs)
                asked = render_reply(sim=sim, topic=i, family=family, u=0.4, message=message, **kwargs)
                assert classify_reply(asked, displays) == classify_reply(drawn, displays), (on, message, asked)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.sampled_from([k for t in load_topics() for k in t.keywords] + ["the", "devoted", "and", "?"])))
def test_topic_hits_count_every_keyword_occurrence_as_a_scan_per_keyword_would(parts: list[str]) -> None:
    """The one-pass, memoised count equals counting each keyword's stems in the text separately."""
    text = " ".join(parts)
    said = stems(text)
    expected = [sum(count_phrase(said, stems(k)) for k in t.keywords) for t in load_topics()]
    assert topic_hits(text) == expected
    assert topic_hits(text) == expected  # the memoised answer, unchanged by the caller's copy
