"""The gateway's metric families, built when Prometheus asks (the catalogue of names is
:mod:`gateway.metrics`, which registers them).

The request path only adds to plain integers of a per-code :class:`CodeMeter`
(about a microsecond; prometheus_client's locked ``Counter``/``Histogram`` children
cost three times that, as much again as a cached route answer itself). Every
writer is the gateway's event loop thread; :func:`request_families` turns the
integers into the counter and histogram families at scrape time.

Everything else here is read at scrape time too, with nothing added to the request
path: :class:`NodeCollector` reads the replicator (a custom collector, no polling
thread), the ACL's refusal counts, the scan fallback, the registration deduper, the
hand-over server and the descriptor budget. In raft mode the replicator's sample is
``RaftReplicator.status()``, which also hashes the table under the apply lock, so a
sample is reused for :data:`SAMPLE_TTL_S` (the whole exposition is rendered in a
worker thread, never on the event loop: :mod:`gateway.metrics_http`).
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from raftstore.vocab import MODE_RAFT
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.listener import ConnectionBudget, open_files_limit, process_budget

if TYPE_CHECKING:
    # Annotations only: the web process imports this module for its latency buckets and
    # should not pay for the gateway's service layer.
    from gateway.handoff import HandoffServer
    from gateway.scan_fallback import ScanFallback
    from raftstore.liveness import RegistrationDeduper
    from raftstore.replicator import Replicator
    from remoting.acl_policy import RemotingAcl

log = logging.getLogger(__name__)

LATENCY_BUCKETS_S = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
"""Cached route answers take tens of microseconds; raft writes milliseconds to seconds."""
_BUCKET_LABELS = (*(repr(float(bound)) for bound in LATENCY_BUCKETS_S), "+Inf")
"""The ``le`` labels as prometheus_client writes them (``0.0001``, ``1.0``, ...)."""
ACL_REASONS = ("unsigned", "unknown-key", "address", "bad-signature", "not-admin")
"""RemotingAcl's refusal reasons, exposed at 0 before the first refusal of each."""
SAMPLE_TTL_S = 1.0
"""How long one replicator sample serves scrapes (a raft status hashes the table)."""
_SUCCESS = int(ResponseCode.SUCCESS)


class CodeMeter:
    """One code label's counts: plain numbers, written by the event loop thread only."""

    __slots__ = ("buckets", "errors", "label", "seconds_sum")

    def __init__(self, label: str) -> None:
        self.label = label
        self.buckets = [0] * len(_BUCKET_LABELS)
        """Requests per latency bucket (not cumulative; the last one is +Inf)."""
        self.errors = 0
        self.seconds_sum = 0.0

    def record(self, answer: RemotingCommand | None, elapsed_s: float, failed: bool) -> None:
        """One handled request (``answer`` None: one-way, or nothing to answer)."""
        self.buckets[bisect.bisect_left(LATENCY_BUCKETS_S, elapsed_s)] += 1
        self.seconds_sum += elapsed_s
        if failed or (answer is not None and answer.code != _SUCCESS):
            self.errors += 1

    async def timed(
        self, pending: Awaitable[RemotingCommand | None], started: float
    ) -> RemotingCommand | None:
        """Await a handler's pending answer, then record it."""
        answer: RemotingCommand | None = None
        failed = True
        try:
            answer = await pending
            failed = False
            return answer
        finally:
            self.record(answer, time.perf_counter() - started, failed)


def request_families(meters: Iterable[CodeMeter]) -> Iterator[Metric]:
    """The request counter, error counter and latency histogram of ``meters``
    (a code with no request yet has no series)."""
    requests = CounterMetricFamily(
        "namesrv_requests",
        "Requests handled on the public remoting port, by request code.",
        labels=["code"],
    )
    errors = CounterMetricFamily(
        "namesrv_request_errors",
        "Answers whose code is not SUCCESS (and handler failures), by request code.",
        labels=["code"],
    )
    seconds = HistogramMetricFamily(
        "namesrv_request_seconds",
        "Time from a request's decoding to its answer, by request code.",
        labels=["code"],
    )
    for meter in meters:
        counts = list(meter.buckets)  # one copy: the buckets and their total agree
        total = sum(counts)
        if not total:
            continue
        cumulative = 0
        buckets: list[tuple[str, float]] = []
        for label, count in zip(_BUCKET_LABELS, counts, strict=True):
            cumulative += count
            buckets.append((label, cumulative))
        requests.add_metric([meter.label], total)
        errors.add_metric([meter.label], min(meter.errors, total))
        seconds.add_metric([meter.label], buckets, meter.seconds_sum)
    yield requests
    yield errors
    yield seconds


@dataclass(frozen=True, slots=True)
class NodeSample:
    """What the gauges show, read from the replicator at scrape time."""

    node_id: str
    mode: str
    live_brokers: int
    topics: int
    raft: tuple[int, bool, bool, int, int] | None = None
    """Raft mode: (term, is leader, leader known, commit index, applied index)."""
    raft_port: tuple[bool, int] | None = None
    """Raft mode: (the Raft port accepts, times it paused accepting)."""
    raft_quorum: bool | None = None
    """Raft mode: this node has contact with a quorum (else it refuses writes)."""
    view_fingerprint: int = 0
    """:func:`view_fingerprint` of the node's client-view digest."""


FINGERPRINT_HEX_DIGITS = 13
"""52 bits: a float64 holds every such integer exactly, so Prometheus compares them."""


def view_fingerprint(view_digest: str) -> int:
    """The first 52 bits of a client-view digest (NODE_STATUS ``view_digest``) as an
    integer: nodes that answer clients alike export the same value, so an alert can
    compare nodes on what clients see, not only on counts."""
    return int(view_digest[:FINGERPRINT_HEX_DIGITS] or "0", 16)


def sample_node(replicator: Replicator) -> NodeSample:
    """Read the gauges' values (any thread: the status hashes the table, off the loop)."""
    live, topics = replicator.read(
        lambda table: (len(table.live_brokers()), len(table.all_topic_list().topic_list))
    )
    raft = raft_port = quorum = None
    status = replicator.status()
    if replicator.mode == MODE_RAFT:
        raft = (
            status.term,
            status.state == "leader",
            status.leader is not None,
            status.commit_index,
            status.applied_index,
        )
        port = getattr(status, "raft_port", "listening")
        raft_port = (port == "listening", int(getattr(status, "raft_accept_pauses", 0)))
        quorum = bool(getattr(status, "quorum_contact", True))
    fingerprint = view_fingerprint(status.view_digest or status.digest)
    return NodeSample(
        replicator.node_id, replicator.mode, live, topics, raft, raft_port, quorum, fingerprint
    )


class NodeCollector:
    """The scrape-time part: request counts, node gauges and the ACL's refusal counts."""

    def __init__(
        self,
        replicator: Replicator,
        acl: RemotingAcl | None,
        meters: Callable[[], Iterable[CodeMeter]] = tuple,
        *,
        sample_ttl_s: float = SAMPLE_TTL_S,
        scan_fallback: ScanFallback | None = None,
        mirror: Any = None,
        registrations: RegistrationDeduper | None = None,
    ) -> None:
        self.replicator = replicator
        self.mirror = mirror
        self.registrations = registrations
        self.acl = acl
        self.meters = meters
        self.scan_fallback = scan_fallback
        # Set by the gateway when it has a read front.
        self.handoff: HandoffServer | None = None
        self.budget: ConnectionBudget = process_budget()
        self.sample_ttl_s = sample_ttl_s
        self._lock = threading.Lock()
        self._sample: NodeSample | None = None
        self._sampled_at = 0.0

    def sample(self) -> NodeSample:
        """A sample at most ``sample_ttl_s`` old."""
        with self._lock:
            now = time.monotonic()
            if self._sample is None or now - self._sampled_at >= self.sample_ttl_s:
                self._sample = sample_node(self.replicator)
                self._sampled_at = now
            return self._sample

    def collect(self) -> Iterator[Metric]:
        """Every scrape-time family (a failed replicator read leaves its gauges out)."""
        yield from request_families(self.meters())
        yield from self._acl_refusals()
        yield from scan_fallback_families(self.scan_fallback)
        yield from self._projection_lag()
        yield from registration_families(self.registrations)
        yield from handoff_families(self.handoff)
        yield from budget_families(self.budget)
        try:
            sample = self.sample()
        except Exception:
            log.exception("metrics: cannot read the replicator")
            return
        yield from node_families(sample)

    def _projection_lag(self) -> Iterable[Metric]:
        lag = None if self.mirror is None else self.mirror.lag_versions()
        if lag is not None:
            yield GaugeMetricFamily(
                "namesrv_projection_lag_versions",
                "Table changes applied but not yet written to the console's projection.",
                lag,
            )

    def _acl_refusals(self) -> Iterable[Metric]:
        acl = self.acl
        if acl is None:
            return
        # dict() of a Counter copies in one C call: safe against the loop's increments.
        counts = dict.fromkeys(ACL_REASONS, 0) | dict(acl.refusals)
        family = CounterMetricFamily(
            "namesrv_acl_refusals",
            "Requests the remoting ACL refused, by reason.",
            labels=["reason"],
        )
        for reason, count in sorted(counts.items()):
            family.add_metric([reason], count)
        yield family


def registration_families(registrations: RegistrationDeduper | None) -> Iterator[Metric]:
    """Raft mode: how this node settled the REGISTER_BROKER copies it received."""
    if registrations is None:
        return
    family = CounterMetricFamily(
        "namesrv_raft_registrations",
        "REGISTER_BROKER copies by how they were settled: proposed as a log entry, or "
        "answered from the applied state as a heartbeat (the leader's copy, or an "
        "unchanged table).",
        labels=["outcome"],
    )
    family.add_metric(["proposed"], registrations.proposed)
    family.add_metric(
        ["answered_from_state"], registrations.answered_as_touch + registrations.answered_undecoded
    )
    yield family
    yield CounterMetricFamily(
        "namesrv_raft_registrations_elided",
        "Of the proposed copies, those sent without their topic table: the table the "
        "broker registered last, with a new DataVersion.",
        registrations.proposed_elided,
    )
    yield CounterMetricFamily(
        "namesrv_raft_registrations_undecoded",
        "Of the copies answered from the applied state, those known by their request "
        "digest, whose body was never decoded.",
        registrations.answered_undecoded,
    )
    yield CounterMetricFamily(
        "namesrv_raft_registration_waits_timed_out",
        "Follower copies proposed after the leader's copy did not arrive in time.",
        registrations.waits_timed_out,
    )


def handoff_families(handoff: HandoffServer | None) -> Iterator[Metric]:
    """With a read front: the brokers' connections it handed over, by outcome."""
    if handoff is None:
        return
    family = CounterMetricFamily(
        "namesrv_front_handoffs",
        "Brokers' connections the read front handed to this process: adopted, or refused "
        "(a malformed hand-over message; its descriptors were closed).",
        labels=["outcome"],
    )
    family.add_metric(["adopted"], handoff.adopted)
    family.add_metric(["refused"], handoff.refused)
    family.add_metric(["over_cap"], handoff.over_cap)
    yield family


def budget_families(budget: ConnectionBudget) -> Iterator[Metric]:
    """The process's descriptor limit, connection cap, open connections and pauses."""
    yield GaugeMetricFamily(
        "namesrv_open_files_limit",
        "The soft limit of open descriptors (RLIMIT_NOFILE) this process runs with.",
        open_files_limit(),
    )
    yield GaugeMetricFamily(
        "namesrv_connections_max",
        "Connections this process holds at most on its public ports (the cap).",
        budget.capacity,
    )
    yield GaugeMetricFamily(
        "namesrv_connections_open",
        "Connections holding a place under the cap: clients, adopted brokers, front links.",
        budget.in_use,
    )
    family = CounterMetricFamily(
        "namesrv_accept_pauses",
        "Times a listener of this process stopped accepting, by reason (it resumes when a "
        "connection closes, or after a short backoff).",
        labels=["reason"],
    )
    for reason, count in sorted(dict(budget.pauses).items()):
        family.add_metric([reason], count)
    yield family


def scan_fallback_families(fallback: ScanFallback | None) -> Iterator[Metric]:
    """Whether this node scans itself now, and how many scans it ran so far (0 when off)."""
    active = fallback is not None and fallback.enabled and fallback.active
    yield GaugeMetricFamily(
        "namesrv_scan_fallback_active",
        "1 while this node scans itself because no external scan arrived for three periods.",
        int(active),
    )
    yield CounterMetricFamily(
        "namesrv_scan_fallback_runs",
        "Liveness scans this node ran by itself because the external scans stopped.",
        0 if fallback is None else fallback.runs,
    )


def node_families(sample: NodeSample) -> Iterator[Metric]:
    """The gauges of ``sample``; the raft ones only in raft mode."""
    info = GaugeMetricFamily(
        "namesrv_node_info", "This gateway's node id and mode.", labels=["node_id", "mode"]
    )
    info.add_metric([sample.node_id, sample.mode], 1)
    yield info
    yield GaugeMetricFamily(
        "namesrv_live_brokers", "Live broker entries in this node's table.", sample.live_brokers
    )
    yield GaugeMetricFamily("namesrv_topics", "Topics in this node's table.", sample.topics)
    yield GaugeMetricFamily(
        "namesrv_client_view_fingerprint",
        "The first 52 bits of this node's digest of what clients see (routes, cluster "
        "info, topic lists, KV, config; not liveness), as a number: equal on nodes that "
        "agree.",
        sample.view_fingerprint,
    )
    if sample.raft is None:
        return
    term, is_leader, leader_known, commit_index, applied_index = sample.raft
    for name, doc, value in (
        ("namesrv_raft_term", "The Raft term this node is in.", term),
        ("namesrv_raft_is_leader", "1 when this node believes it leads.", int(is_leader)),
        ("namesrv_raft_leader_known", "1 when this node knows a leader.", int(leader_known)),
        ("namesrv_raft_commit_index", "The highest log index known committed.", commit_index),
        ("namesrv_raft_applied_index", "The highest log index applied here.", applied_index),
        (
            "namesrv_raft_apply_lag",
            "Committed entries not applied here yet (commit - applied).",
            max(0, commit_index - applied_index),
        ),
    ):
        yield GaugeMetricFamily(name, doc, value)
    if sample.raft_quorum is not None:
        yield GaugeMetricFamily(
            "namesrv_raft_quorum",
            "1 while this node has contact with a quorum; 0: it refuses every write.",
            int(sample.raft_quorum),
        )
    if sample.raft_port is not None:
        listening, pauses = sample.raft_port
        yield GaugeMetricFamily(
            "namesrv_raft_port_listening",
            "1 while the Raft port accepts peers; 0 while it is paused (out of descriptors) "
            "or not listening (a peer that loses its connection cannot connect again).",
            int(listening),
        )
        yield CounterMetricFamily(
            "namesrv_raft_accept_pauses",
            "Times the Raft port stopped accepting for a while after a failed accept.",
            pauses,
        )
