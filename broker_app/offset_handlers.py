"""The offset codes of the broker's consumer side: committed offsets and queue bounds.

Upstream's ``ConsumerManageProcessor`` (QUERY/UPDATE_CONSUMER_OFFSET 14/15) and the
offset queries of ``AdminBrokerProcessor`` (SEARCH_OFFSET_BY_TIMESTAMP 29, GET_MAX/MIN_OFFSET
30/31, GET_EARLIEST_MSG_STORETIME 32). Kept apart from
:class:`~broker_app.consume_processor.ConsumeProcessor`, which owns an
:class:`OffsetHandlers` and hands these codes to it, so pulls and client bookkeeping
read on their own; the code table stays in :class:`~broker_app.processor.BrokerProcessor`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker_app.core import BrokerCore
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.headers import require_int, require_str

if TYPE_CHECKING:
    from remoting.connection import Connection

QUERY_NOT_FOUND_REMARK = "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"


class OffsetHandlers:
    """Handlers of the offset codes; each takes the request and its connection."""

    def __init__(self, broker: BrokerCore) -> None:
        self.broker = broker

    async def query_consumer_offset(
        self, request: RemotingCommand, _conn: Connection
    ) -> RemotingCommand:
        """QUERY_CONSUMER_OFFSET: the committed offset; for a group that never committed
        on a queue that still starts at 0, offset 0 (the group reads it all), else
        QUERY_NOT_FOUND (the client then starts where ``consumeFromWhere`` says)."""
        group = require_str(request, "consumerGroup")
        topic = require_str(request, "topic")
        queue_id = require_int(request, "queueId", bits=32)
        offset = self.broker.metadata.consumer_offset(topic, group, queue_id)
        if offset is None:
            store = self.broker.require_store()
            if store.queue_min_offset(topic, queue_id) > 0:
                return request.make_response(ResponseCode.QUERY_NOT_FOUND, QUERY_NOT_FOUND_REMARK)
            offset = 0
        return request.make_response(ResponseCode.SUCCESS, ext_fields={"offset": str(offset)})

    async def update_consumer_offset(
        self, request: RemotingCommand, _conn: Connection
    ) -> RemotingCommand | None:
        """UPDATE_CONSUMER_OFFSET (often one-way): store the group's offset of one queue.
        A slave takes it too; the master's table overwrites it at the next sync."""
        self.broker.groups.commit_offset(
            require_str(request, "topic"),
            require_str(request, "consumerGroup"),
            require_int(request, "queueId", bits=32),
            require_int(request, "commitOffset"),
        )
        if request.is_oneway:
            return None
        return request.make_response(ResponseCode.SUCCESS)

    async def search_offset(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first queue offset stored at or after ``timestamp``."""
        store = self.broker.require_store()
        offset = store.offset_by_time(
            require_str(request, "topic"),
            require_int(request, "queueId", bits=32),
            require_int(request, "timestamp"),
        )
        return request.make_response(ResponseCode.SUCCESS, ext_fields={"offset": str(offset)})

    async def max_offset(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """GET_MAX_OFFSET: the queue's next offset."""
        store = self.broker.require_store()
        offset = store.queue_max_offset(
            require_str(request, "topic"), require_int(request, "queueId", bits=32)
        )
        return request.make_response(ResponseCode.SUCCESS, ext_fields={"offset": str(offset)})

    async def min_offset(self, request: RemotingCommand, _conn: Connection) -> RemotingCommand:
        """GET_MIN_OFFSET: the queue's first readable offset."""
        store = self.broker.require_store()
        offset = store.queue_min_offset(
            require_str(request, "topic"), require_int(request, "queueId", bits=32)
        )
        return request.make_response(ResponseCode.SUCCESS, ext_fields={"offset": str(offset)})

    async def earliest_store_time(
        self, request: RemotingCommand, _conn: Connection
    ) -> RemotingCommand:
        """GET_EARLIEST_MSG_STORETIME: store time of the queue's first message (-1: none)."""
        store = self.broker.require_store()
        topic = require_str(request, "topic")
        queue_id = require_int(request, "queueId", bits=32)
        stored = store.store_time_at(topic, queue_id, store.queue_min_offset(topic, queue_id))
        timestamp = -1 if stored is None else stored
        return request.make_response(ResponseCode.SUCCESS, ext_fields={"timestamp": str(timestamp)})
