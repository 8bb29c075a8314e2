"""The one topic-name rule (``remoting.topic_rule``) the broker, its store and the
NameServer's console, API and CLI share."""

from __future__ import annotations

import pytest

from remoting.topic_rule import TOPIC_CHARS_MAX, is_legal_topic, topic_refusal


@pytest.mark.parametrize("name", ["TopicTest", "%RETRY%group", "a|b", "x" * TOPIC_CHARS_MAX])
def test_legal_names(name: str) -> None:
    assert is_legal_topic(name)
    assert topic_refusal(name) is None


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("", "blank"),
        ("   ", "blank"),
        ("has space", "illegal characters"),
        ("TopicTest\n", "illegal characters"),  # a `$` anchor would let this through
        ("tópico", "illegal characters"),
        ("x" * (TOPIC_CHARS_MAX + 1), "longer than topic max length"),
    ],
)
def test_refused_names_say_why(name: str, words: str) -> None:
    assert not is_legal_topic(name)
    refusal = topic_refusal(name)
    assert refusal is not None and words in refusal
