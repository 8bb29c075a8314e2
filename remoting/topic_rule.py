"""RocketMQ's topic-name rule (``TopicValidator``), defined once for the broker, its
store and the NameServer's console, API and CLI.

``validateTopic`` refuses a blank name, a character outside ``[%|a-zA-Z0-9_-]`` and a
name over ``TOPIC_MAX_LENGTH`` (127 characters). Names are matched whole
(``fullmatch``): a ``$`` anchor would let a trailing newline through.
"""

from __future__ import annotations

import re

TOPIC_CHARS_MAX = 127
TOPIC_CHARS = re.compile(r"[%|a-zA-Z0-9_-]+")


def is_legal_topic(name: str) -> bool:
    """Whether ``name`` follows the rule."""
    return len(name) <= TOPIC_CHARS_MAX and TOPIC_CHARS.fullmatch(name) is not None


def topic_refusal(topic: str) -> str | None:
    """Why ``topic`` is not a legal name, in ``validateTopic``'s words, or None."""
    if not topic.strip():
        return "The specified topic is blank."
    if not TOPIC_CHARS.fullmatch(topic):
        return "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_CHARS_MAX:
        return "The specified topic is longer than topic max length."
    return None
