"""The history schema: one directory per run, four Parquet tables and ``run.json``.

See docs/EXPERIMENTS.md "History schema" for the meaning of every column. The schemas here
are the single source of truth; the writer refuses rows that do not fit them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from remoting.model import PERM_READ, PERM_WRITE

SCHEMA_VERSION = 3
"""2: ``operations`` gained ``invoke_us`` and ``complete_us`` (version 1 runs read them as
null, and readers fall back to the millisecond columns). 3: ``operations`` gained
``origin`` (older runs read it as null: origin unknown)."""
RUN_META_FILE = "run.json"

OPERATIONS = "operations"
WRITES = "writes"
FAULTS = "faults"
NODE_STATES = "node_states"
TABLE_NAMES = (OPERATIONS, WRITES, FAULTS, NODE_STATES)

# Operation kinds. Reads observe a topic's route; writes change it (as a register).
KIND_ROUTE_READ = "route_read"
KIND_SEND = "send"
KIND_CONSUME_ALLOC = "consume_alloc"
KIND_REGISTER = "register"
KIND_UNREGISTER = "unregister"
KIND_EXPIRE = "expire"
KIND_DELETE_TOPIC = "delete_topic"
KIND_CREATE_TOPIC = "create_topic"
KIND_BROKER_DOWN = "broker_down"
READ_KINDS = frozenset({KIND_ROUTE_READ})
PROCESS_ADMIN = "admin"
"""The process of an admin's topic write (create or delete on some NameServers)."""
PROCESS_RAFT = "raft"
"""The process of a write the raft cluster made on its own: an expiry its leader's scan
reports (``extra.reported_by``, origin ``node``), or one the prober inferred
(``extra.inferred``, origin ``inferred``)."""
PROCESS_FOLLOW_UP = "follow-up-reader"
"""The process of the reads right after each acknowledged write (experiments.follow_up):
not a client, so its bursts are no client's poll interval."""
PROCESS_SEPARATOR = "@"
"""Between a process kind and the node it reads, as in ``follow-up-reader@n2``."""

WRITE_KINDS = frozenset(
    {
        KIND_REGISTER,
        KIND_UNREGISTER,
        KIND_EXPIRE,
        KIND_DELETE_TOPIC,
        KIND_CREATE_TOPIC,
        KIND_BROKER_DOWN,
    }
)

# Where a write came from (``operations.origin``; null on every other operation and on
# the writes of runs recorded before the column, schema version 2 and older).
ORIGIN_CLIENT = "client"
"""Acknowledged to a workload client: a broker's periodic registration round."""
ORIGIN_HARNESS = "harness"
"""Sent by the harness itself: the route churn, an admin's topic write, a scenario's
broker stop or start, the warm-up's agreed routes."""
ORIGIN_NODE = "node"
"""Taken from a node: an entry of a node's journal of the changes no client asked for
(NODE_STATUS ``expiries``: a raft leader's committed expiry with its log position, an
eventual node's own expiry or closed-connection unregistration, a raft failover
election), or a simulated node's own change."""
ORIGIN_INFERRED = "inferred"
"""Inferred by the harness: a change the prober saw that no recorded write or node
journal entry explains, or a quiet registration a late expiry report turns into a write.
A correct run of the nemesis (every round a fresh share) has none: the prober's
inference stays as a detector, and ``inferred_writes`` counts what it found."""
ORIGINS = frozenset({ORIGIN_CLIENT, ORIGIN_HARNESS, ORIGIN_NODE, ORIGIN_INFERRED})

OUTCOME_OK = "ok"
OUTCOME_NOT_FOUND = "not_found"
OUTCOME_ERROR = "error"
OUTCOME_TIMEOUT = "timeout"
OUTCOMES = frozenset({OUTCOME_OK, OUTCOME_NOT_FOUND, OUTCOME_ERROR, OUTCOME_TIMEOUT})

FAULT_KILL_BROKER = "kill_broker"
FAULT_PARTITION = "partition"
FAULT_ASYMMETRIC_PARTITION = "asymmetric_partition"
FAULT_KILL_NAMESRV = "kill_namesrv"
FAULT_LEADER_KILL = "leader_kill"
PARTITION_FAULTS = frozenset({FAULT_PARTITION, FAULT_ASYMMETRIC_PARTITION})

NO_VERSION = -1
NO_MASTER_ADDR = "-"
ROUTE_ITEM_SEP = ","
ROUTE_FIELD_SEP = ":"

OPERATIONS_SCHEMA = pa.schema(
    [
        ("op_id", pa.int64()),
        ("process", pa.string()),
        ("kind", pa.string()),
        ("node", pa.string()),
        ("topic", pa.string()),
        ("invoke_ms", pa.int64()),
        ("complete_ms", pa.int64()),
        ("outcome", pa.string()),
        ("value", pa.string()),
        ("version", pa.int64()),
        ("broker", pa.string()),
        ("extra", pa.string()),
        ("invoke_us", pa.int64()),
        ("complete_us", pa.int64()),
        ("origin", pa.string()),
    ]
)
OPTIONAL_TRAILING: dict[str, tuple[str, ...]] = {OPERATIONS: ("origin",)}
"""Trailing columns a row may leave out (the writer stores null): columns added after
the table's first version, so a writer of the older shape still fits."""
WRITES_SCHEMA = pa.schema(
    [
        ("ts_ms", pa.int64()),
        ("topic", pa.string()),
        ("broker", pa.string()),
        ("kind", pa.string()),
        ("value", pa.string()),
        ("version", pa.int64()),
    ]
)
FAULTS_SCHEMA = pa.schema(
    [
        ("start_ms", pa.int64()),
        ("end_ms", pa.int64()),
        ("kind", pa.string()),
        ("target", pa.string()),
        ("detail", pa.string()),
    ]
)
NODE_STATES_SCHEMA = pa.schema(
    [
        ("ts_ms", pa.int64()),
        ("node", pa.string()),
        ("topic", pa.string()),
        ("value", pa.string()),
        ("version", pa.int64()),
    ]
)
SCHEMAS: dict[str, pa.Schema] = {
    OPERATIONS: OPERATIONS_SCHEMA,
    WRITES: WRITES_SCHEMA,
    FAULTS: FAULTS_SCHEMA,
    NODE_STATES: NODE_STATES_SCHEMA,
}


@dataclass(frozen=True, slots=True)
class RouteItem:
    """One broker's share of a topic route, the unit of the canonical route value."""

    broker: str
    master_addr: str
    write_queues: int
    read_queues: int
    perm: int

    def encode(self) -> str:
        """``broker:addrId0:wq:rq:perm``; the address may itself contain ':'."""
        return ROUTE_FIELD_SEP.join(
            (
                self.broker,
                self.master_addr,
                str(self.write_queues),
                str(self.read_queues),
                str(self.perm),
            )
        )

    @property
    def writable(self) -> bool:
        """True when producers may send here: the WRITE bit and a master, as
        ``topicRouteData2TopicPublishInfo`` requires."""
        return bool(self.perm & PERM_WRITE) and self.master_addr != NO_MASTER_ADDR

    @property
    def readable(self) -> bool:
        """True when consumers may read here (READ bit; no master needed)."""
        return bool(self.perm & PERM_READ)


def canonical_route(items: Iterable[RouteItem]) -> str:
    """The canonical string of a route: items sorted by their encoding, ',' joined.

    The empty string is the route of a topic that does not exist (TOPIC_NOT_EXIST).
    """
    return ROUTE_ITEM_SEP.join(sorted(item.encode() for item in items))


def parse_route_item(text: str) -> RouteItem:
    """Inverse of :meth:`RouteItem.encode` (broker first, the last three are numbers)."""
    parts = text.split(ROUTE_FIELD_SEP)
    if len(parts) < 5:
        raise ValueError(f"bad route item {text!r}")
    return RouteItem(
        broker=parts[0],
        master_addr=ROUTE_FIELD_SEP.join(parts[1:-3]),
        write_queues=int(parts[-3]),
        read_queues=int(parts[-2]),
        perm=int(parts[-1]),
    )


def parse_route(value: str | None) -> list[RouteItem]:
    """Inverse of :func:`canonical_route`; ``""`` and ``None`` give no items."""
    if not value:
        return []
    return [parse_route_item(item) for item in value.split(ROUTE_ITEM_SEP)]


def route_brokers(value: str | None) -> frozenset[str]:
    """The broker names a canonical route value routes to."""
    return frozenset(item.broker for item in parse_route(value))


def canonical_queues(queues: Iterable[tuple[str, int]]) -> str:
    """The value of a ``consume_alloc`` operation: sorted ``broker:queueId`` items."""
    return ROUTE_ITEM_SEP.join(sorted(f"{broker}:{qid}" for broker, qid in queues))


US_PER_MS = 1000


def interval_us(row: Mapping[str, Any]) -> tuple[int, int]:
    """An ``operations`` row's [invoke, complete] in microseconds: the ``_us`` columns
    when set, else the ``_ms`` ones times 1000 (version 1 runs); a completion stamped
    before its invocation is instantaneous, never inverted. Every reader that orders
    operations (the checker, the anomaly classes, the report) uses this one rule."""
    invoke = row.get("invoke_us")
    complete = row.get("complete_us")
    if invoke is None:
        invoke = int(row["invoke_ms"]) * US_PER_MS
    if complete is None:
        complete = int(row["complete_ms"]) * US_PER_MS
    return int(invoke), max(int(complete), int(invoke))


def follow_up_process(node: str) -> str:
    """The process of the follow-up reads of ``node``: ``follow-up-reader@<node>``.

    One process per node read, so a process of the history is one client session against
    one node: the per-client anomaly classes (non-monotonic reads, versions going back)
    then compare reads of the same node, never two nodes that are each allowed their own
    lag (a fresh answer from n1 followed by n2's older one is no client going back in
    time). Every follow-up process starts with :data:`PROCESS_FOLLOW_UP` (what an
    analysis that leaves the reader out matches on)."""
    return f"{PROCESS_FOLLOW_UP}{PROCESS_SEPARATOR}{node}"


def is_follow_up(process: str) -> bool:
    """True for a process of the follow-up reader (:func:`follow_up_process`), and for
    ``follow-up-reader`` alone, the one name of its reads in runs recorded before it had
    one per node."""
    return process == PROCESS_FOLLOW_UP or process.startswith(PROCESS_FOLLOW_UP + PROCESS_SEPARATOR)
