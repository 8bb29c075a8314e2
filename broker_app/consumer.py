"""A push consumer over the remoting protocol (RocketMQ's ``DefaultMQPushConsumer``, small).

What ``manage.py consume`` and ``bench/consume.py`` run, and what the broker tests
use as a client that behaves like the real ones:

* routes of the topic and of ``%RETRY%<group>`` from the NameServers (GET_ROUTEINFO_BY_TOPIC);
* HEART_BEAT to every broker of those routes, masters and slaves, every
  ``heartbeat_interval_s`` (so a slave knows the group when the master is gone);
* rebalance with :func:`allocate_averagely` (``AllocateMessageQueueAveragely``) over the
  group's client ids (GET_CONSUMER_LIST_BY_GROUP) every ``rebalance_interval_s`` and
  at once on NOTIFY_CONSUMER_IDS_CHANGED;
* one long-polling PULL_MESSAGE loop per assigned queue, from the broker the last
  answer suggested (``suggestWhichBrokerId``), falling back to any broker of the
  group when that one is not in the route (a dead master: its slave);
* the handler's failures go back with CONSUMER_SEND_MSG_BACK (the retry topic);
  offsets are committed in the pulls and with UPDATE_CONSUMER_OFFSET.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from broker_app.clients import QueueKey, build_subscription, retry_topic
from broker_app.consume_processor import FLAG_COMMIT_OFFSET, FLAG_SUBSCRIPTION, FLAG_SUSPEND
from broker_app.redelivery import PROPERTY_RETRY_TOPIC
from broker_app.store.record import TAGS_PROPERTY, parse_properties
from remoting.bodies import decode_topic_route_data
from remoting.client import RemotingClient, RemotingClientError
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.message_codec import MessageDecodeError, MessageExt, decode_messages
from remoting.model import TopicRouteData, is_readable

log = logging.getLogger(__name__)

MASTER_ID = 0
SUSPEND_MS = 15_000
PULL_TIMEOUT_S = 20.0
REQUEST_TIMEOUT_S = 3.0
PULL_BATCH = 32
RETRY_DELAY_S = 1.0

Handler = Callable[[MessageExt], Awaitable[bool]]
"""Processes one message; False (or an exception) sends it back for a retry."""


def allocate_averagely(
    queues: Sequence[QueueKey], client_ids: Sequence[str], me: str
) -> list[QueueKey]:
    """``AllocateMessageQueueAveragely``: consecutive blocks of the sorted queues, the
    first ``len(queues) % len(clients)`` clients taking one more."""
    queues, client_ids = sorted(queues), sorted(client_ids)
    if me not in client_ids or not queues:
        return []
    index = client_ids.index(me)
    mod = len(queues) % len(client_ids)
    if len(queues) <= len(client_ids):
        average = 1
    elif mod > 0 and index < mod:
        average = len(queues) // len(client_ids) + 1
    else:
        average = len(queues) // len(client_ids)
    start = index * average if mod > 0 and index < mod else index * average + mod
    size = min(average, len(queues) - start)
    return [queues[(start + i) % len(queues)] for i in range(max(0, size))]


def default_client_id() -> str:
    """``ClientConfig.buildMQClientId``: host ip @ instance name (pid here)."""
    try:
        ip = socket.gethostbyname(socket.gethostname())
    except OSError:
        ip = "127.0.0.1"
    return f"{ip}@{os.getpid()}"


@dataclass
class _QueueState:
    offset: int
    committed: int = -1
    suggest: int = MASTER_ID
    task: asyncio.Task[None] | None = None


@dataclass
class PushConsumer:
    """One consumer client of ``group`` subscribed to ``topic`` with ``expression``."""

    namesrv_addrs: Sequence[str]
    group: str
    topic: str
    handler: Handler
    expression: str = "*"
    client_id: str = field(default_factory=default_client_id)
    heartbeat_interval_s: float = 5.0
    rebalance_interval_s: float = 5.0
    max_reconsume_times: int = 16

    def __post_init__(self) -> None:
        self.client = RemotingClient(on_request=self._pushed)
        retry = retry_topic(self.group)
        self.subscriptions = {
            self.topic: build_subscription(self.topic, self.expression, sub_version=1),
            retry: build_subscription(retry, "*", sub_version=1),
        }
        self.routes: dict[str, TopicRouteData] = {}
        self.queues: dict[QueueKey, _QueueState] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._rebalance_now = asyncio.Event()
        self._stopping = False

    # -- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        """Read routes, heartbeat, rebalance, and keep doing so in the background."""
        await self.refresh_routes()
        await self.heartbeat()
        await self.rebalance()
        self._tasks.append(asyncio.create_task(self._housekeeping()))

    async def stop(self) -> None:
        """Stop pulling, commit offsets, leave the group (UNREGISTER_CLIENT)."""
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        for state in self.queues.values():
            if state.task is not None:
                state.task.cancel()
        for task in [*self._tasks, *(s.task for s in self.queues.values() if s.task)]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.commit_offsets()
        for addr in self._broker_addrs():
            request = RemotingCommand.request(
                RequestCode.UNREGISTER_CLIENT,
                {"clientID": self.client_id, "consumerGroup": self.group},
            )
            with contextlib.suppress(RemotingClientError, OSError):
                await self.client.invoke(addr, request, REQUEST_TIMEOUT_S)
        await self.client.close()

    async def _housekeeping(self) -> None:
        next_heartbeat = 0.0
        loop = asyncio.get_running_loop()
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rebalance_now.wait(), self.rebalance_interval_s)
            self._rebalance_now.clear()
            try:
                await self.refresh_routes()
                if loop.time() >= next_heartbeat:
                    await self.heartbeat()
                    next_heartbeat = loop.time() + self.heartbeat_interval_s
                await self.rebalance()
                await self.commit_offsets()
            except (RemotingClientError, OSError) as exc:
                log.info("consumer housekeeping: %s", exc)

    async def _pushed(self, request: RemotingCommand, _peer: object) -> RemotingCommand | None:
        if request.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            self._rebalance_now.set()
            return None
        return request.make_response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
        )

    # -- routes, heartbeats, rebalance -----------------------------------------

    async def refresh_routes(self) -> None:
        """GET_ROUTEINFO_BY_TOPIC for the topic and the retry topic (first answer wins)."""
        for topic in self.subscriptions:
            for addr in self.namesrv_addrs:
                request = RemotingCommand.request(
                    RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}
                )
                try:
                    response = await self.client.invoke(addr, request, REQUEST_TIMEOUT_S)
                except (RemotingClientError, OSError):
                    continue
                if response.code == ResponseCode.SUCCESS and response.body:
                    self.routes[topic] = decode_topic_route_data(response.body)
                    break

    def _broker_addrs(self) -> list[str]:
        addrs = {
            a
            for route in self.routes.values()
            for data in route.broker_datas
            for a in data.broker_addrs.values()
        }
        return sorted(addrs)

    def _addr_of(self, broker_name: str, broker_id: int) -> str | None:
        """The address of ``broker_id`` in the group, else any broker of it (master first)."""
        for route in self.routes.values():
            for data in route.broker_datas:
                if data.broker_name == broker_name and data.broker_addrs:
                    found = data.broker_addrs.get(broker_id)
                    return found or data.broker_addrs[min(data.broker_addrs)]
        return None

    async def heartbeat(self) -> None:
        """HEART_BEAT to every broker of the routes."""
        body = json.dumps(
            {
                "clientID": self.client_id,
                "consumerDataSet": [
                    {
                        "groupName": self.group,
                        "consumeType": "CONSUME_PASSIVELY",
                        "messageModel": "CLUSTERING",
                        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                        "unitMode": False,
                        "subscriptionDataSet": [
                            {
                                "topic": sub.topic,
                                "subString": sub.sub_string,
                                "tagsSet": list(sub.tags),
                                "codeSet": [],
                                "subVersion": sub.sub_version,
                                "expressionType": "TAG",
                                "classFilterMode": False,
                            }
                            for sub in self.subscriptions.values()
                        ],
                    }
                ],
                "producerDataSet": [],
            }
        ).encode()
        for addr in self._broker_addrs():
            request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, body)
            with contextlib.suppress(RemotingClientError, OSError):
                await self.client.invoke(addr, request, REQUEST_TIMEOUT_S)

    def _all_queues(self, topic: str) -> list[QueueKey]:
        route = self.routes.get(topic)
        if route is None:
            return []
        return [
            QueueKey(topic, data.broker_name, queue_id)
            for data in route.queue_datas
            if is_readable(data.perm)
            for queue_id in range(data.read_queue_nums)
        ]

    async def _client_ids(self) -> list[str]:
        for addr in self._broker_addrs():
            request = RemotingCommand.request(
                RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": self.group}
            )
            try:
                response = await self.client.invoke(addr, request, REQUEST_TIMEOUT_S)
            except (RemotingClientError, OSError):
                continue
            if response.code == ResponseCode.SUCCESS and response.body:
                ids = json.loads(response.body).get("consumerIdList") or []
                return [str(i) for i in ids]
        return []

    async def rebalance(self) -> None:
        """Take this client's share of every subscribed topic's queues; stop the rest."""
        client_ids = await self._client_ids()
        wanted: set[QueueKey] = set()
        for topic in self.subscriptions:
            wanted.update(allocate_averagely(self._all_queues(topic), client_ids, self.client_id))
        for queue in [q for q in self.queues if q not in wanted]:
            state = self.queues.pop(queue)
            if state.task is not None:
                state.task.cancel()
            await self._commit(queue, state)
        for queue in sorted(wanted - set(self.queues)):
            offset = await self._start_offset(queue)
            if offset is None:
                continue
            state = _QueueState(offset, committed=offset)
            self.queues[queue] = state
            state.task = asyncio.create_task(self._pull_loop(queue, state))

    def assigned(self) -> list[QueueKey]:
        """The queues this client pulls now."""
        return sorted(self.queues)

    async def _start_offset(self, queue: QueueKey) -> int | None:
        addr = self._addr_of(queue.broker_name, MASTER_ID)
        if addr is None:
            return None
        request = RemotingCommand.request(
            RequestCode.QUERY_CONSUMER_OFFSET,
            {
                "consumerGroup": self.group,
                "topic": queue.topic,
                "queueId": str(queue.queue_id),
            },
        )
        try:
            response = await self.client.invoke(addr, request, REQUEST_TIMEOUT_S)
        except (RemotingClientError, OSError):
            return None
        if response.code == ResponseCode.SUCCESS:
            return int((response.ext_fields or {}).get("offset", "0"))
        return 0  # CONSUME_FROM_FIRST_OFFSET for a group that never committed

    # -- pulling ---------------------------------------------------------------

    async def _pull_loop(self, queue: QueueKey, state: _QueueState) -> None:
        subscription = self.subscriptions[queue.topic]
        while not self._stopping:
            addr = self._addr_of(queue.broker_name, state.suggest)
            if addr is None:
                await asyncio.sleep(RETRY_DELAY_S)
                continue
            sys_flag = FLAG_SUSPEND | FLAG_SUBSCRIPTION
            if state.committed >= 0:
                sys_flag |= FLAG_COMMIT_OFFSET
            request = RemotingCommand.request(
                RequestCode.PULL_MESSAGE,
                {
                    "consumerGroup": self.group,
                    "topic": queue.topic,
                    "queueId": str(queue.queue_id),
                    "queueOffset": str(state.offset),
                    "maxMsgNums": str(PULL_BATCH),
                    "sysFlag": str(sys_flag),
                    "commitOffset": str(max(state.committed, 0)),
                    "suspendTimeoutMillis": str(SUSPEND_MS),
                    "subscription": subscription.sub_string,
                    "subVersion": str(subscription.sub_version),
                    "expressionType": "TAG",
                },
            )
            try:
                response = await self.client.invoke(addr, request, PULL_TIMEOUT_S)
            except (RemotingClientError, OSError) as exc:
                log.info("pull %s from %s failed: %s", queue, addr, exc)
                state.suggest = MASTER_ID
                await asyncio.sleep(RETRY_DELAY_S)
                continue
            ext = response.ext_fields or {}
            state.suggest = int(ext.get("suggestWhichBrokerId", MASTER_ID))
            next_offset = int(ext.get("nextBeginOffset", state.offset))
            if response.code == ResponseCode.SUCCESS:
                try:
                    messages = decode_messages(response.body or b"")
                except MessageDecodeError as exc:
                    log.warning("undecodable pull answer from %s: %s", addr, exc)
                    await asyncio.sleep(RETRY_DELAY_S)
                    continue
                for message in messages:
                    await self._consume(queue, message)
                state.offset = next_offset
                state.committed = next_offset
            elif response.code in (
                ResponseCode.PULL_NOT_FOUND,
                ResponseCode.PULL_RETRY_IMMEDIATELY,
                ResponseCode.PULL_OFFSET_MOVED,
            ):
                state.offset = next_offset
            else:
                log.info("pull %s from %s: code %d %s", queue, addr, response.code, response.remark)
                await asyncio.sleep(RETRY_DELAY_S)

    async def _consume(self, queue: QueueKey, message: MessageExt) -> None:
        properties = parse_properties(message.properties)
        if queue.topic == retry_topic(self.group):
            original = properties.get(PROPERTY_RETRY_TOPIC, self.topic)
            message = _with_topic(message, original)
        subscription = self.subscriptions.get(message.topic)
        tags = properties.get(TAGS_PROPERTY)
        if subscription is not None and subscription.tags and tags not in subscription.tags:
            return
        try:
            ok = await self.handler(message)
        except Exception:
            log.exception("message handler failed")
            ok = False
        if not ok:
            await self._send_back(queue, message)

    async def _send_back(self, queue: QueueKey, message: MessageExt) -> None:
        addr = self._addr_of(queue.broker_name, MASTER_ID)
        request = RemotingCommand.request(
            RequestCode.CONSUMER_SEND_MSG_BACK,
            {
                "offset": str(message.commit_log_offset),
                "group": self.group,
                "delayLevel": "0",
                "originMsgId": message.msg_id,
                "originTopic": message.topic,
                "unitMode": "false",
                "maxReconsumeTimes": str(self.max_reconsume_times),
            },
        )
        while addr is not None and not self._stopping:
            try:
                response = await self.client.invoke(addr, request, REQUEST_TIMEOUT_S)
            except (RemotingClientError, OSError):
                response = None
            if response is not None and response.code == ResponseCode.SUCCESS:
                return
            await asyncio.sleep(RETRY_DELAY_S)
            addr = self._addr_of(queue.broker_name, MASTER_ID)

    async def commit_offsets(self) -> None:
        """UPDATE_CONSUMER_OFFSET for every queue this client holds, moved or not, as
        upstream's ``RemoteBrokerOffsetStore.persistAll`` does each round: a master
        that came back, or took over, without the last commit gets it again."""
        for queue, state in list(self.queues.items()):
            await self._commit(queue, state)

    async def _commit(self, queue: QueueKey, state: _QueueState) -> None:
        addr = self._addr_of(queue.broker_name, MASTER_ID)
        if addr is None:
            return
        request = RemotingCommand.request(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {
                "consumerGroup": self.group,
                "topic": queue.topic,
                "queueId": str(queue.queue_id),
                "commitOffset": str(state.offset),
            },
        )
        with contextlib.suppress(RemotingClientError, OSError):
            await self.client.invoke(addr, request, REQUEST_TIMEOUT_S)


def _with_topic(message: MessageExt, topic: str) -> MessageExt:
    return dataclasses.replace(message, topic=topic)
