"""Creating and deleting topics: the one service behind the console, the REST API and the CLI.

RocketMQ's dashboard creates a topic on the brokers (UPDATE_AND_CREATE_TOPIC, 17, to
each chosen group's master, which then registers it with every NameServer) and
deletes it on the brokers first (DELETE_TOPIC_IN_BROKER, 215, to every master and
slave of its clusters), then on every NameServer (DELETE_TOPIC_IN_NAMESRV, 216): a
topic deleted on the NameServers only comes back with a broker's next full
registration. That is the default here (``method="brokers"``). The NameServer-only
path (REGISTER_TOPIC_IN_NAMESRV, 217, and 216 alone) stays an explicit option
(``method="namesrv"``).

A create of a topic some chosen group already serves (in this node's projection)
says what it changes there (:func:`what_changes`): "Topic X updated on broker-a:
readQueueNums 4 -> 8", or "already exists on broker-a with these settings; nothing
changed", on every surface.

Every call returns a :class:`TopicChange`: a sentence, the HTTP status it amounts to
(201/200 done, 207 partly done, 502/503 done nowhere), each broker's result and
each node's. A delete of a topic that no node routes and no broker holds raises
:class:`TopicNotFound` (404) before anything is sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from localcluster import broker_control
from localcluster.broker_control import BrokerControlError
from namesrv_app import gateway_client, models
from namesrv_app.conf import namesrv_settings
from namesrv_app.gateway_client import GatewayError, NodeAnswer, WriteOutcome
from remoting.blocking import BlockingClient
from remoting.bodies import decode_topic_config_serialize_wrapper
from remoting.client import RemotingClientError
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import BodyDecodeError
from remoting.model import QueueData
from remoting.topic_rule import topic_refusal

METHOD_BROKERS = "brokers"
METHOD_NAMESRV = "namesrv"
METHODS = (METHOD_BROKERS, METHOD_NAMESRV)
METHOD_CHOICES = (
    (METHOD_BROKERS, "through the brokers (recommended)"),
    (
        METHOD_NAMESRV,
        "NameServer only (advanced: brokers will not know the topic and their "
        "next registration may overwrite it)",
    ),
)
DELETE_METHOD_CHOICES = (
    (METHOD_BROKERS, "on the brokers, then the NameServers (recommended)"),
    (
        METHOD_NAMESRV,
        "NameServer only (advanced: brokers keep the topic and their next "
        "registration brings it back)",
    ),
)
METHOD_HELP = (
    "brokers (default): UPDATE_AND_CREATE_TOPIC / DELETE_TOPIC_IN_BROKER on the brokers "
    "first, then every NameServer; namesrv: NameServer-only (REGISTER_TOPIC_IN_NAMESRV / "
    "DELETE_TOPIC_IN_NAMESRV), which the brokers' next registration may undo"
)
ROUTE_WAIT_S = 5.0
"""How long a topic created through the brokers may take to appear in every node's route."""
ROUTE_POLL_S = 0.2
BROKER_CALLS_MAX = 16
"""Brokers asked in parallel by one topic operation."""
BROKER_READ_TIMEOUT_S = 3.0
REREGISTER_NOTE = (
    "A broker that still holds the topic brings it back with its next full registration "
    "(RocketMQ's brokers send one every 30 s): retry once it is reachable."
)


class TopicNotFound(GatewayError):
    """A delete of a topic that no NameServer routes and no broker holds (HTTP 404)."""

    http_status = 404


@dataclass(frozen=True, slots=True)
class BrokerResult:
    """One broker's part of a topic change: done (``error`` None) or why not."""

    addr: str | None
    group: str
    error: str | None = None

    @property
    def done(self) -> bool:
        """Whether the broker did it."""
        return self.error is None

    def label(self) -> str:
        """``group (addr)``, or the address alone when the group is unknown."""
        if self.addr is None:
            return self.group
        return f"{self.group} ({self.addr})" if self.group else self.addr

    def as_dict(self) -> dict[str, Any]:
        """The API's shape: ``{"addr", "group", "done", "error"}``."""
        return {"addr": self.addr, "group": self.group, "done": self.done, "error": self.error}


@dataclass(frozen=True, slots=True)
class TopicChange:
    """What one create or delete did: the sentence, its HTTP status, each broker's and
    each node's result (``outcome`` None when no NameServer step was confirmed)."""

    topic: str
    detail: str
    http_status: int
    brokers: tuple[BrokerResult, ...] = ()
    outcome: WriteOutcome | None = None

    @property
    def complete(self) -> bool:
        """Done on every broker and every node."""
        return self.http_status < HTTPStatus.MULTI_STATUS

    def body(self) -> dict[str, Any]:
        """The API answer: the shape of every write's (ok, detail, replicated, nodes)
        plus ``brokers``; ``partial`` when some broker or node missed it."""
        body: dict[str, Any] = {
            "ok": self.complete,
            "detail": self.detail,
            "replicated": bool(self.outcome and self.outcome.replicated),
            "nodes": self.outcome.per_node() if self.outcome else [],
            "brokers": [b.as_dict() for b in self.brokers],
        }
        if self.http_status == HTTPStatus.MULTI_STATUS:
            body["partial"] = True
        return body


class TopicChangeIncomplete(GatewayError):
    """A topic change that did not go through everywhere, for callers that raise
    (the console's forms): never shown as success; ``change`` has the detail."""

    def __init__(self, change: TopicChange) -> None:
        super().__init__(change.detail)
        self.change = change
        self.http_status = change.http_status


# ------------------------------------------------------------------- brokers


def create_topic_on_broker(
    addr: str, topic: str, *, read_queue_nums: int, write_queue_nums: int, perm: int
) -> None:
    """UPDATE_AND_CREATE_TOPIC on one broker, signed as this node (the broker's ACL wants
    an admin); BrokerControlError when it is unreachable or refuses."""
    broker_control.create_topic(
        addr,
        topic,
        read_queue_nums=read_queue_nums,
        write_queue_nums=write_queue_nums,
        perm=perm,
        credentials=gateway_client.signing_credentials(),
    )


def on_brokers(addrs: list[str], call: Callable[[str], None]) -> dict[str, str | None]:
    """``call`` on every address in parallel; address -> None (done) or why it failed."""

    def one(addr: str) -> str | None:
        try:
            call(addr)
        except (BrokerControlError, ValueError) as exc:
            # ValueError: a registered address that is not host:port.
            return str(exc)
        return None

    if not addrs:
        return {}
    with ThreadPoolExecutor(max_workers=min(BROKER_CALLS_MAX, len(addrs))) as pool:
        return dict(zip(addrs, pool.map(one, addrs), strict=True))


def master_addrs(broker_names: list[str]) -> dict[str, str | None]:
    """Each broker group's master address as this node knows it (None: no master)."""
    found = dict(
        models.BrokerAddress.objects.filter(
            group__broker_name__in=broker_names, broker_id=0
        ).values_list("group__broker_name", "addr")
    )
    return {name: found.get(name) for name in broker_names}


def topic_broker_addrs(topic: str, cluster: str | None = None) -> dict[str, str]:
    """Every broker that may hold ``topic``, masters first, then slaves, with its group:
    every master and slave of the topic's clusters, as RocketMQ's tools send
    DELETE_TOPIC_IN_BROKER.

    The clusters are ``cluster`` when given, else those of this node's route
    (linearizable), else every cluster this node knows (a topic already gone from
    the NameServers may still be held by a broker, which would register it again).
    The route's own addresses are always included; the rest come from the projection.
    """
    route = gateway_client.topic_route(topic, linearizable=True)
    datas = [] if route is None else route.broker_datas
    datas = [b for b in datas if cluster is None or b.cluster == cluster]
    found = {
        (broker_id, addr, b.broker_name)
        for b in datas
        for broker_id, addr in b.broker_addrs.items()
    }
    rows = models.BrokerAddress.objects.all()
    if cluster is not None:
        rows = rows.filter(group__cluster=cluster)
    elif route is not None:
        rows = rows.filter(group__cluster__in={b.cluster for b in datas})
    found.update(rows.values_list("broker_id", "addr", "group__broker_name"))
    addrs: dict[str, str] = {}
    for _, addr, group in sorted(found, key=lambda item: (item[0] != 0, item[1])):
        addrs.setdefault(addr, group)
    return addrs


def broker_topics(addr: str) -> set[str]:
    """GET_ALL_TOPIC_CONFIG of one broker: the names in its topic table;
    BrokerControlError when it does not answer with one."""
    request = RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG)
    try:
        with BlockingClient(addr, timeout_s=BROKER_READ_TIMEOUT_S) as client:
            response = client.invoke(request)
        if response.code != ResponseCode.SUCCESS or response.body is None:
            raise BrokerControlError(f"broker {addr} answered {response.code}: {response.remark}")
        return set(decode_topic_config_serialize_wrapper(response.body).topic_config_table)
    except (RemotingClientError, OSError, BodyDecodeError, ValueError) as exc:
        raise BrokerControlError(f"broker {addr}: no topic table: {exc}") from exc


# ------------------------------------------------------------------- the NameServers


def _node_results(outcome: WriteOutcome) -> str:
    """Where a NameServer write landed, and where it failed, for a sentence."""
    missed = "; ".join(f"{a.node.node_id}: {a.error}" for a in outcome.failed)
    where = outcome.where()
    return f"{where} (it FAILED on {missed})" if missed else where


def _failures(results: Sequence[BrokerResult]) -> str:
    return "; ".join(f"{r.label()}: {r.error}" for r in results if r.error is not None)


def _status(done: int, brokers: Sequence[BrokerResult], outcome: WriteOutcome | None) -> int:
    missed = any(not b.done for b in brokers) or outcome is None or bool(outcome.failed)
    return HTTPStatus.MULTI_STATUS if missed else done


def _wait_for_routes(topic: str, expected: dict[str, tuple[int, int]]) -> WriteOutcome:
    """Poll every node's own route until each serves ``topic`` on every group of
    ``expected`` with its (read, write) queue counts, for at most ROUTE_WAIT_S;
    each node's answer (an error naming the groups it still misses)."""
    deadline = time.monotonic() + ROUTE_WAIT_S
    raft = namesrv_settings().MODE == gateway_client.MODE_RAFT
    while True:
        answers = [_route_answer(a, expected) for a in gateway_client.every_node_route(topic)]
        outcome = WriteOutcome(raft, tuple(answers))
        if not outcome.failed or time.monotonic() >= deadline:
            return outcome
        time.sleep(ROUTE_POLL_S)


def _route_answer(answer: NodeAnswer, expected: dict[str, tuple[int, int]]) -> NodeAnswer:
    if answer.error is not None:
        return answer
    queues = answer.value.queue_datas if answer.value is not None else []
    served = {q.broker_name: (q.read_queue_nums, q.write_queue_nums) for q in queues}
    missing = [name for name, nums in expected.items() if served.get(name) != nums]
    if not missing:
        return NodeAnswer(answer.node, answer.value)
    error = f"its route does not list it on {', '.join(missing)} after {ROUTE_WAIT_S:.0f} s"
    return NodeAnswer(answer.node, error=error)


# ------------------------------------------------------------------- create


def create_topic(
    topic: str, queue_datas: Sequence[QueueData], method: str = METHOD_BROKERS
) -> TopicChange:
    """Create ``topic`` with these queues per broker group: through each group's master
    (default), or registered on the NameServers only. GatewayError (503/502) when the
    NameServer-only registration landed nowhere."""
    changes = what_changes(topic, queue_datas)
    if method == METHOD_NAMESRV:
        outcome = gateway_client.register_topic(topic, list(queue_datas))
        groups = ", ".join(q.broker_name for q in queue_datas)
        where = f"on the NameServers only (queues on {groups}) {_node_results(outcome)}."
        detail = (
            f"{changes}. Registered {where}" if changes else f"Registered topic {topic} {where}"
        )
        return TopicChange(topic, detail, _status(HTTPStatus.CREATED, (), outcome), (), outcome)
    return _create_through_brokers(topic, queue_datas, changes)


CHANGED_FIELDS = (
    ("readQueueNums", "read_queue_nums"),
    ("writeQueueNums", "write_queue_nums"),
    ("perm", "perm"),
)
"""What a repeated create may change on a group, by RocketMQ's (TopicConfig's) names."""


def what_changes(topic: str, queue_datas: Sequence[QueueData]) -> str | None:
    """What creating ``topic`` with these queues changes, as this node's projection
    knows the topic, e.g. "Topic X updated on broker-a: readQueueNums 4 -> 8"; None
    when no chosen group serves it yet (a plain create, said as "Created topic")."""
    names = [q.broker_name for q in queue_datas]
    before = {
        row.broker_name: row
        for row in models.QueueData.objects.filter(topic=topic, broker_name__in=names)
    }
    if not before:
        return None
    updated, unchanged, created = [], [], []
    for queues in queue_datas:
        old = before.get(queues.broker_name)
        if old is None:
            created.append(queues.broker_name)
            continue
        diffs = [
            f"{label} {getattr(old, attr)} -> {getattr(queues, attr)}"
            for label, attr in CHANGED_FIELDS
            if getattr(old, attr) != getattr(queues, attr)
        ]
        if diffs:
            updated.append(f"updated on {queues.broker_name}: {', '.join(diffs)}")
        else:
            unchanged.append(queues.broker_name)
    parts = updated
    if unchanged:
        there = " there" if updated or created else ""
        parts.append(
            f"already exists on {', '.join(unchanged)} with these settings; nothing changed{there}"
        )
    if created:
        parts.append(f"created on {', '.join(created)}")
    return f"Topic {topic} " + "; ".join(parts)


def _create_through_brokers(
    topic: str, queue_datas: Sequence[QueueData], changes: str | None
) -> TopicChange:
    specs = {q.broker_name: q for q in queue_datas}
    masters = master_addrs(list(specs))
    gateway_client.signing_credentials()  # fails here, once, when this node cannot sign
    targets = {addr: name for name, addr in masters.items() if addr is not None}
    answers = on_brokers(
        list(targets),
        lambda addr: create_topic_on_broker(
            addr,
            topic,
            read_queue_nums=specs[targets[addr]].read_queue_nums,
            write_queue_nums=specs[targets[addr]].write_queue_nums,
            perm=specs[targets[addr]].perm,
        ),
    )
    results = tuple(
        BrokerResult(addr, name, "no master registered" if addr is None else answers[addr])
        for name, addr in masters.items()
    )
    created = [r for r in results if r.done]
    if not created:
        detail = f"Topic {topic} was created on no broker: {_failures(results)}."
        return TopicChange(topic, detail, HTTPStatus.BAD_GATEWAY, results)
    expected = {
        r.group: (specs[r.group].read_queue_nums, specs[r.group].write_queue_nums) for r in created
    }
    outcome = _wait_for_routes(topic, expected)
    done = ", ".join(r.label() for r in created)
    if changes:
        detail = f"{changes}. The masters of {done} have it"
    else:
        detail = f"Created topic {topic} on the masters of {done}"
    if any(not r.done for r in results):
        detail += f"; it FAILED on {_failures(results)}"
    if outcome.failed:
        missed = "; ".join(f"{a.node.node_id}: {a.error}" for a in outcome.failed)
        detail += (
            f". The brokers registered it, but not every node confirms it ({missed}; the "
            "brokers register asynchronously: check the Topics page)."
        )
    else:
        nodes = ", ".join(outcome.done_on)
        detail += f"; the brokers registered it with the NameServers ({nodes} route it)."
    return TopicChange(
        topic, detail, _status(HTTPStatus.CREATED, results, outcome), results, outcome
    )


# ------------------------------------------------------------------- delete


def delete_topic(
    topic: str, cluster: str | None = None, method: str = METHOD_BROKERS
) -> TopicChange:
    """Delete ``topic`` (or one cluster's queues of it): on every broker of its clusters
    first (default), then on every NameServer. TopicNotFound when no node routes it and
    no broker holds it; GatewayError when the NameServer step landed nowhere and no
    broker did anything either."""
    brokers = _brokers_for(topic, cluster) if method == METHOD_BROKERS else {}
    if not _may_exist(topic, brokers):
        raise TopicNotFound(
            f"No topic {topic}: no NameServer routes it"
            + (" and no broker holds it." if method == METHOD_BROKERS else ".")
        )
    results = _delete_on_brokers(topic, brokers)
    scope = f" in cluster {cluster}" if cluster else ""
    on_brokers_text = _brokers_sentence(method, topic, results)
    try:
        outcome = gateway_client.delete_topic(topic, cluster)
    except GatewayError as exc:
        if not any(r.done for r in results):
            raise
        detail = (
            f"Deleted topic {topic}{scope} {on_brokers_text}"
            + (f"; it FAILED on broker {_failures(results)}" if not all_done(results) else "")
            + f", but on NO NameServer: {exc}"
        )
        return TopicChange(topic, detail, exc.http_status, results)
    detail = f"Deleted topic {topic}{scope} {on_brokers_text}, then on the NameServers " + (
        _node_results(outcome)
    )
    if not all_done(results):
        detail += f"; it FAILED on broker {_failures(results)}. {REREGISTER_NOTE}"
    else:
        detail += "."
    return TopicChange(topic, detail, _status(HTTPStatus.OK, results, outcome), results, outcome)


def all_done(results: Sequence[BrokerResult]) -> bool:
    """Every broker did its part."""
    return all(r.done for r in results)


def _brokers_for(topic: str, cluster: str | None) -> dict[str, str]:
    """Address -> group of every broker that may hold ``topic``; none for a name outside
    the topic rule (no broker can hold one)."""
    if topic_refusal(topic) is not None:
        return {}
    return topic_broker_addrs(topic, cluster)


def _may_exist(topic: str, brokers: dict[str, str]) -> bool:
    """False only when every node answered without a route for ``topic`` and every
    broker answered without it in its table: a node or broker that did not answer may
    hold it, so the delete goes on."""
    routes = gateway_client.every_node_route(topic)
    if any(a.error is not None or a.value is not None for a in routes):
        return True
    held: list[bool] = []

    def holds(addr: str) -> None:
        held.append(topic in broker_topics(addr))

    answers = on_brokers(list(brokers), holds)
    return any(error is not None for error in answers.values()) or any(held)


def _delete_on_brokers(topic: str, brokers: dict[str, str]) -> tuple[BrokerResult, ...]:
    if not brokers:
        return ()
    credentials = gateway_client.signing_credentials()
    answers = on_brokers(
        list(brokers), lambda addr: broker_control.delete_topic(addr, topic, credentials)
    )
    return tuple(BrokerResult(addr, brokers[addr], error) for addr, error in answers.items())


def _brokers_sentence(method: str, topic: str, results: Sequence[BrokerResult]) -> str:
    if method == METHOD_NAMESRV:
        return "(NameServer only: no broker asked)"
    if topic_refusal(topic) is not None:
        return "(no broker asked: no broker can hold a name outside the topic rule)"
    if not results:
        return "(no broker of its clusters is registered)"
    done = [r.addr for r in results if r.done and r.addr]
    return f"on brokers {', '.join(done) or '(none)'}"
