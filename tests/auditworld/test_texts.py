from __future__ import annotations

import itertools

from auditrl.auditworld.texts import FALLBACK_TOPIC, classify_message, load_topics, render_user_message


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
