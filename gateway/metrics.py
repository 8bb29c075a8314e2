"""Prometheus metrics of one gateway: its registry and what the request path counts.

Each :class:`GatewayMetrics` owns its own ``CollectorRegistry`` (never the
process-wide default), so several gateways in one test process never clash. The
families read at scrape time are built by :mod:`gateway.metric_families`; the port
that serves them is :mod:`gateway.metrics_http`. It has no authentication (the
metrics are read-only and name nothing secret), so it binds only the configured
host: the gateway's host by default, loopback when that host is a wildcard
(:func:`metrics_bind_host`).

Counted on the public remoting port, per request code (the code as a decimal
string; a code outside :class:`~remoting.codes.RequestCode` is counted as
``other``, so a client sending random codes cannot grow the label set):

* ``namesrv_requests_total{code}`` and ``namesrv_request_seconds{code}`` (from the
  handler's call to the answer, not the socket write);
* ``namesrv_request_errors_total{code}``: answers whose code is not SUCCESS (ACL
  refusals, unknown topics and failed writes included) and handler exceptions.

With a read front, ``namesrv_front_route_answers_total``: the route queries the front
answered from its copies, which never reach this handler (the front reports them every
second); ``namesrv_front_handoffs_total{outcome}``: brokers' connections the front
handed to this process (``adopted``), whose hand-over this process refused
(``refused``), or closed because it was at its connection cap (``over_cap``), see
:mod:`gateway.handoff`.

The process's descriptor budget (:mod:`remoting.listener`), read at scrape time:
``namesrv_open_files_limit`` (the soft RLIMIT_NOFILE in force),
``namesrv_connections_max`` (the cap derived from it, or ``NAMESRV_CONNECTIONS_MAX``),
``namesrv_connections_open`` (connections holding a slot: clients, adopted brokers,
the read front's links) and ``namesrv_accept_pauses_total{reason}`` (times a listener
stopped accepting: ``at the connection cap``, ``out of descriptors``, ``accept
failed``). In raft mode ``namesrv_raft_port_listening`` is 1 while the Raft port
accepts, 0 while it is paused (out of descriptors) or not listening (peers cannot
reconnect), and ``namesrv_raft_accept_pauses_total`` counts its pauses.

Counted by :meth:`GatewayMetrics.count_scan`, one of the service's
``scan_observers`` (:class:`~gateway.services.NameServerService`: the Celery scan over
the internal port and the gateway's own scan loops alike): ``namesrv_scan_runs_total``,
``namesrv_scan_failures_total`` and ``namesrv_scan_expired_total`` (live entries the
scans of this node expired; in raft mode only the leader's scan expires anything).

The scan fallback (``GatewayOptions.scan_fallback_s``;
:class:`~gateway.scan_fallback.ScanFallback`), read at scrape time:
``namesrv_scan_fallback_active`` (1 while this node scans itself because no external
scan arrived for three periods, the alarm of NODE_STATUS) and
``namesrv_scan_fallback_runs_total`` (the scans it ran; they count in
``namesrv_scan_runs_total`` too). Both are 0 when the fallback is off.

Read at scrape time, with nothing added to the request path:

* ``namesrv_acl_refusals_total{reason}``: the remoting ACL's own refusal counts
  (``RemotingAcl.refusals``, every reason at 0 until it happens; absent when the
  ACL is off);
* raft mode: ``namesrv_raft_registrations{outcome}`` (REGISTER_BROKER copies
  ``proposed`` as log entries or ``answered_from_state``, see
  :class:`~raftstore.liveness.RegistrationDeduper`),
  ``namesrv_raft_registrations_undecoded_total`` (of those, the ones known by their
  request digest) and ``namesrv_raft_registration_waits_timed_out``;
* gauges: ``namesrv_node_info{node_id,mode}``, ``namesrv_live_brokers``,
  ``namesrv_topics`` and, in raft mode only, ``namesrv_raft_term``,
  ``namesrv_raft_is_leader``, ``namesrv_raft_leader_known``,
  ``namesrv_raft_commit_index``, ``namesrv_raft_applied_index`` and
  ``namesrv_raft_apply_lag`` (commit - applied), ``namesrv_raft_quorum`` (0 while
  the node has no contact with a quorum and refuses writes).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.exposition import choose_encoder

from gateway.metric_families import CodeMeter, NodeCollector
from gateway.scan_fallback import ScanFallback, ScanOutcome
from raftstore.liveness import RegistrationDeduper
from raftstore.replicator import Replicator
from remoting.acl_policy import RemotingAcl
from remoting.codes import RequestCode
from remoting.command import RemotingCommand

OTHER_CODE = "other"
"""The ``code`` label of every request code outside RequestCode."""
KNOWN_CODES: frozenset[int] = frozenset(int(code) for code in RequestCode)
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]"})
LOOPBACK_HOST = "127.0.0.1"

C = TypeVar("C")
Answer = RemotingCommand | Awaitable[RemotingCommand | None] | None
"""What the gateway's public handler returns: an answer now, a pending one, or none."""


def metrics_bind_host(metrics_host: str | None, gateway_host: str) -> str:
    """Where the metrics port listens: the given host, else the gateway's host,
    else loopback when the gateway listens on every interface (only an explicit
    ``metrics_host`` exposes the metrics on a wildcard address)."""
    if metrics_host:
        return metrics_host
    return LOOPBACK_HOST if gateway_host in WILDCARD_HOSTS else gateway_host


class GatewayMetrics:
    """One gateway's registry: request and scan counters plus the node collector."""

    def __init__(
        self,
        replicator: Replicator,
        acl: RemotingAcl | None = None,
        scan_fallback: ScanFallback | None = None,
        *,
        mirror: Any = None,
        registrations: RegistrationDeduper | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        self.scan_runs = Counter(
            "namesrv_scan_runs", "Liveness scans run on this node.", registry=self.registry
        )
        self.scan_failures = Counter(
            "namesrv_scan_failures",
            "Liveness scans that failed (no quorum, a leadership change).",
            registry=self.registry,
        )
        self.scan_expired = Counter(
            "namesrv_scan_expired",
            "Live broker entries expired by this node's scans.",
            registry=self.registry,
        )
        self.front_route_answers = Counter(
            "namesrv_front_route_answers",
            "Route queries the read front answered from its copies: they never reach this "
            "process, so namesrv_requests_total does not count them (reported every second).",
            registry=self.registry,
        )
        self._meters: dict[int, CodeMeter] = {}
        self._other = CodeMeter(OTHER_CODE)
        self.collector = NodeCollector(
            replicator,
            acl,
            self.meters,
            scan_fallback=scan_fallback,
            mirror=mirror,
            registrations=registrations,
        )
        self.registry.register(self.collector)

    def meters(self) -> list[CodeMeter]:
        """Every meter so far (any thread: the copy is one C call under the GIL)."""
        return [*self._meters.values(), self._other]

    def meter(self, code: int) -> CodeMeter:
        """The meter of ``code`` (``other`` for codes outside RequestCode, never cached)."""
        meter = self._meters.get(code)
        if meter is None:
            if code not in KNOWN_CODES:
                return self._other
            meter = self._meters[code] = CodeMeter(str(code))
        return meter

    def handle(
        self,
        handler: Callable[[RemotingCommand, C], Answer],
        request: RemotingCommand,
        conn: C,
    ) -> Answer:
        """Call the remoting ``handler`` and count what it answers.

        An immediate answer is recorded at once; a pending one is wrapped in a
        coroutine that records it when it completes.
        """
        meter = self.meter(request.code)
        started = time.perf_counter()
        try:
            pending = handler(request, conn)
        except Exception:
            meter.record(None, time.perf_counter() - started, True)
            raise
        if pending is None or isinstance(pending, RemotingCommand):
            meter.record(pending, time.perf_counter() - started, False)
            return pending
        return meter.timed(pending, started)

    def count_scan(self, result: ScanOutcome | Exception) -> None:
        """Count one liveness scan: what it expired, or that it failed (a
        :data:`~gateway.scan_fallback.ScanObserver` of the service)."""
        self.scan_runs.inc()
        if isinstance(result, Exception):
            self.scan_failures.inc()
        elif result.expired:
            self.scan_expired.inc(len(result.expired))

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """The registry rendered for an ``Accept`` header: (body, content type)."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type
