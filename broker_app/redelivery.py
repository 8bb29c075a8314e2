"""Delayed delivery, consumer retries and the dead-letter queue.

* **Delay levels** (``ScheduleMessageService``): a message sent with the DELAY
  property (a producer's ``delayTimeLevel``, or a retry) is stored in
  ``SCHEDULE_TOPIC_XXXX``, queue ``level - 1``, with its real topic and queue in
  REAL_TOPIC / REAL_QID. :class:`ScheduleService` moves each one to its real
  queue once ``store time + delay`` has passed; how far each level got is the
  broker's delay-offset table (persisted, and copied to slaves by SlaveSynchronize).
* **Send back** (``SendMessageProcessor.consumerSendMsgBack``): a consumer that
  could not process a message sends its commit-log offset back with
  CONSUMER_SEND_MSG_BACK (36). :func:`send_back` builds the copy that goes to
  ``%RETRY%<group>`` after delay level ``3 + reconsumeTimes`` (10 s, 30 s, 1 min ...),
  or to ``%DLQ%<group>`` once it was reconsumed ``maxReconsumeTimes`` times.

Time is an argument; the caller stores what these functions return.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from broker_app.clients import dlq_topic, retry_topic
from broker_app.store.message_store import MessageInput
from broker_app.store.record import MessageRecord, format_properties, parse_properties

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
"""Upstream's literal name of the delay topic, ``XXXX`` included
(``TopicValidator.RMQ_SYS_SCHEDULE_TOPIC``): clients and tools know it by that name."""
PROPERTY_DELAY = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
"""``messageDelayLevel``'s default: level 1 is 1 s, level 18 two hours."""
RETRY_FIRST_DELAY_LEVEL = 3
DEFAULT_MAX_RECONSUME_TIMES = 16
"""``SubscriptionGroupConfig.retryMaxTimes``."""
DELIVER_BATCH_MAX = 256
"""Messages one level moves per tick (the rest go on the next one)."""
_UNITS_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL = re.compile(r"^(\d+)([smhd])$")


class DelayLevelError(ValueError):
    """A ``messageDelayLevel`` setting that is not a list like ``1s 5s 10m``."""


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """``messageDelayLevel`` -> delay of each level in ms (level 1 first)."""
    levels = []
    for item in text.split():
        match = _LEVEL.match(item.strip().lower())
        if match is None:
            raise DelayLevelError(f"messageDelayLevel: {item!r} is not like 1s, 5m, 2h or 1d")
        levels.append(int(match.group(1)) * _UNITS_MS[match.group(2)])
    if not levels:
        raise DelayLevelError("messageDelayLevel names no level")
    return tuple(levels)


def reconsume_times(properties: Mapping[str, str]) -> int:
    """How often a stored message was reconsumed already (RECONSUME_TIME)."""
    try:
        return max(0, int(properties.get(PROPERTY_RECONSUME_TIME, "0")))
    except ValueError:
        return 0


def schedule(message: MessageInput, levels: tuple[int, ...]) -> MessageInput:
    """The copy to store for ``message``: itself, or the schedule topic's when it has a
    DELAY level (clamped to the highest level, as upstream)."""
    properties = parse_properties(message.properties)
    try:
        level = int(properties.get(PROPERTY_DELAY, "0"))
    except ValueError:
        level = 0
    if level <= 0 or message.topic == SCHEDULE_TOPIC:
        return message
    level = min(level, len(levels))
    properties[PROPERTY_DELAY] = str(level)
    properties[PROPERTY_REAL_TOPIC] = message.topic
    properties[PROPERTY_REAL_QUEUE_ID] = str(message.queue_id)
    return MessageInput(
        SCHEDULE_TOPIC,
        level - 1,
        message.body,
        format_properties(properties),
        message.flag,
        message.sys_flag,
        message.born_timestamp_ms,
    )


@dataclass(frozen=True, slots=True)
class SendBack:
    """Where a sent-back message goes and the message to store."""

    message: MessageInput
    dead_letter: bool


def send_back(
    original: MessageRecord,
    *,
    group: str,
    delay_level: int,
    max_reconsume_times: int,
    origin_msg_id: str,
    original_msg_id: str,
) -> SendBack:
    """The retry (or dead-letter) copy of ``original`` for consumer group ``group``."""
    properties = parse_properties(original.properties)
    times = reconsume_times(properties)
    properties.setdefault(PROPERTY_RETRY_TOPIC, original.topic)
    properties.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, origin_msg_id or original_msg_id)
    properties.pop(PROPERTY_DELAY, None)
    properties.pop(PROPERTY_REAL_TOPIC, None)
    properties.pop(PROPERTY_REAL_QUEUE_ID, None)
    dead = times >= max_reconsume_times or delay_level < 0
    if dead:
        topic = dlq_topic(group)
    else:
        topic = retry_topic(group)
        properties[PROPERTY_DELAY] = str(delay_level or RETRY_FIRST_DELAY_LEVEL + times)
    properties[PROPERTY_RECONSUME_TIME] = str(times + 1)
    properties[PROPERTY_MAX_RECONSUME_TIMES] = str(max_reconsume_times)
    message = MessageInput(
        topic,
        0,
        original.body,
        format_properties(properties),
        original.flag,
        original.sys_flag,
        original.born_timestamp_ms,
    )
    return SendBack(message, dead)


def delivered_copy(scheduled: MessageRecord) -> MessageInput | None:
    """The message a schedule-topic entry becomes when due (None when it is damaged)."""
    properties = parse_properties(scheduled.properties)
    topic = properties.get(PROPERTY_REAL_TOPIC)
    try:
        queue_id = int(properties.get(PROPERTY_REAL_QUEUE_ID, ""))
    except ValueError:
        return None
    if not topic:
        return None
    properties.pop(PROPERTY_DELAY, None)
    return MessageInput(
        topic,
        queue_id,
        scheduled.body,
        format_properties(properties),
        scheduled.flag,
        scheduled.sys_flag,
        scheduled.born_timestamp_ms,
    )


Reader = Callable[[int, int], MessageRecord | None]
"""(queue id, queue offset) of the schedule topic -> the stored message."""


class ScheduleService:
    """Moves due messages from the schedule topic to their real queues (a master's job)."""

    def __init__(self, levels: tuple[int, ...]) -> None:
        self.levels = levels

    def due(
        self,
        offsets: Mapping[int, int],
        max_offset: Callable[[int], int],
        read: Reader,
        now_ms: int,
    ) -> tuple[list[MessageInput], dict[int, int]]:
        """The messages due at ``now_ms`` and the delay offsets after moving them.

        ``offsets`` maps level -> next schedule-queue offset to deliver;
        ``max_offset(queue id)`` is the schedule queue's end.
        """
        ready: list[MessageInput] = []
        after = dict(offsets)
        for level, delay_ms in enumerate(self.levels, start=1):
            queue_id = level - 1
            offset = after.get(level, 0)
            end = max_offset(queue_id)
            moved = 0
            while offset < end and moved < DELIVER_BATCH_MAX:
                scheduled = read(queue_id, offset)
                if scheduled is not None:
                    if scheduled.store_timestamp_ms + delay_ms > now_ms:
                        break
                    copy = delivered_copy(scheduled)
                    if copy is not None:
                        ready.append(copy)
                offset += 1
                moved += 1
            if offset != offsets.get(level, 0):
                after[level] = offset
        return ready, after
