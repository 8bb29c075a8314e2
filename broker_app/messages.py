"""Requests a producer sends to a broker, built the way RocketMQ's clients build them.

Shared by ``manage.py send_message``, the HA benchmark and the broker tests, so the
SEND_MESSAGE header a test or a benchmark sends is the one the command sends.
"""

from __future__ import annotations

from broker_app.store.record import PROPERTY_NAME_SEPARATOR, PROPERTY_SEPARATOR
from remoting.codes import RequestCode
from remoting.command import RemotingCommand


def build_send_request(
    topic: str,
    body: bytes,
    *,
    queue_id: int,
    producer_group: str,
    tags: str | None,
    born_timestamp_ms: int,
) -> RemotingCommand:
    """A SEND_MESSAGE (10) request with SendMessageRequestHeader fields."""
    properties = f"WAIT{PROPERTY_NAME_SEPARATOR}true{PROPERTY_SEPARATOR}"
    if tags:
        properties += f"TAGS{PROPERTY_NAME_SEPARATOR}{tags}{PROPERTY_SEPARATOR}"
    fields = {
        "producerGroup": producer_group,
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": str(queue_id),
        "sysFlag": "0",
        "bornTimestamp": str(born_timestamp_ms),
        "flag": "0",
        "properties": properties,
        "reconsumeTimes": "0",
        "unitMode": "false",
        "batch": "false",
    }
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, fields, body)
