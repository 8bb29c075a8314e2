"""The input checks of :mod:`gateway.services`: each turns a caller's value into one
a command may carry, or raises :class:`ServiceError` with a remark fit for the wire.

Kept apart so the write path reads as commands, not as validation.
"""

from __future__ import annotations

from collections.abc import Iterable

from remoting.body_limits import NAME_CHARS_MAX
from remoting.model import QueueData, has_control_characters, has_lone_surrogate

BROKER_ID_MAX = 2**63 - 1
"""Broker ids are Java longs."""
QUEUE_NUMS_MAX = 2**31 - 1
"""Queue counts, perm and flags are Java ints."""
KV_VALUE_CHARS_MAX = 1_048_576
"""A KV value bigger than 1 MiB is a mistake, not a config item."""


class ServiceError(ValueError):
    """Input a service refuses; the message is fit to show the caller (a wire remark)."""


def _check_text(label: str, value: object, *, chars_max: int = NAME_CHARS_MAX) -> str:
    """A non-empty string without control characters, at most ``chars_max`` long."""
    if not isinstance(value, str) or not value:
        raise ServiceError(f"{label} is missing")
    if len(value) > chars_max:
        raise ServiceError(f"{label} is longer than {chars_max} characters")
    if has_control_characters(value):
        raise ServiceError(f"{label} contains control characters")
    return _check_unicode(label, value)


def _check_unicode(label: str, value: str) -> str:
    """``value`` unless it holds a lone surrogate (:func:`has_lone_surrogate`)."""
    if has_lone_surrogate(value):
        raise ServiceError(f"{label} holds a lone surrogate: not Unicode text")
    return value


def _check_topic_names(names: Iterable[str]) -> None:
    """Every registered topic name is Unicode text. One encode of them all (the common
    case costs microseconds for thousands of topics), then the culprit is named."""
    names = list(names)
    try:
        "".join(names).encode("utf-8")
    except UnicodeEncodeError:
        bad = next(n for n in names if has_lone_surrogate(n))
        raise ServiceError(
            f"topic {bad.encode('utf-8', 'backslashreplace').decode()} holds a lone "
            "surrogate: not Unicode text"
        ) from None


def _check_offset(label: str, value: int | None) -> int | None:
    """An optional commit-log offset (a Java long, never negative)."""
    return None if value is None else _check_int(label, value, low=0, high=BROKER_ID_MAX)


def _check_int(label: str, value: object, *, low: int, high: int) -> int:
    """An int (not a bool) within ``low..high``."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ServiceError(f"{label} must be an integer")
    if not low <= value <= high:
        raise ServiceError(f"{label} must be within {low}..{high}, got {value}")
    return value


def _check_queue_data(queue: QueueData) -> QueueData:
    _check_text("brokerName", queue.broker_name)
    for label, number in (
        ("readQueueNums", queue.read_queue_nums),
        ("writeQueueNums", queue.write_queue_nums),
        ("perm", queue.perm),
        ("topicSysFlag", queue.topic_sys_flag),
    ):
        _check_int(label, number, low=0, high=QUEUE_NUMS_MAX)
    return queue


def _check_addr(addr: object) -> str:
    """A ``host:port`` Raft address."""
    text = _check_text("addr", addr)
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ServiceError(f"addr {text!r} is not host:port")
    return text


def _check_text_or_empty(label: str, value: str | None) -> str:
    """A KV value may be empty but not missing, control characters allowed (it is data)."""
    if value is None:
        raise ServiceError(f"{label} is missing")
    if len(value) > KV_VALUE_CHARS_MAX:
        raise ServiceError(f"{label} is longer than {KV_VALUE_CHARS_MAX} characters")
    return _check_unicode(label, value)
