"""What a gateway is started with: the command line and settings, merged."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from raftstore.failover import DEFAULT_FAILOVER_LAG_BYTES_MAX
from raftstore.raft import DEFAULT_PROPOSE_TIMEOUT_S, DEFAULT_SKEW_ALLOWANCE_MS, RaftSettings
from raftstore.replicator import MODE_EVENTUAL
from remoting.limits import (
    CONNECTIONS_PER_ADDRESS_MAX,
    FRAME_DEADLINE_S,
    UNFINISHED_FRAMES_BYTES_MAX,
)

DRAIN_TIMEOUT_S = 5.0


class GatewayConfigError(ValueError):
    """The gateway cannot start with the given options."""


@dataclass(frozen=True, slots=True)
class RaftOptions:
    """Raft mode's part of the options.

    ``port`` with the gateway's host is this node's Raft identity
    (``host:port``); ``peers`` are every member's identities (self may be
    listed); ``dial`` maps a peer identity to the address actually dialled
    (tests route every link through ``tools/faultproxy.py``).
    """

    port: int
    peers: tuple[str, ...]
    data_dir: Path
    secret: str = field(repr=False)
    """The cluster secret every Raft peer proves (docs/SECURITY.md, "Raft port")."""
    dial: Mapping[str, str] = field(default_factory=dict)
    bind_host: str | None = None
    """Where the Raft port listens; None: the host of this node's Raft identity."""
    host: str | None = None
    """The host of this node's Raft identity (what its peers dial); None: the gateway's
    remoting host. A node on its own host advertises its routable address here."""
    propose_timeout_s: float = DEFAULT_PROPOSE_TIMEOUT_S
    skew_allowance_ms: int = DEFAULT_SKEW_ALLOWANCE_MS
    settings: RaftSettings = field(default_factory=RaftSettings)
    failover_lag_bytes_max: int = DEFAULT_FAILOVER_LAG_BYTES_MAX


@dataclass(frozen=True, slots=True)
class GatewayOptions:
    """Everything a gateway needs to start (the command line and settings, merged)."""

    node_id: str
    host: str = "127.0.0.1"
    port: int = 9876
    remoting_advertise: str | None = None
    """``host:port`` clients and brokers reach the remoting port at. Raft mode records it
    in the replicated state for every node's address server (gateway/member_addrs.py);
    None: nothing is recorded (``run_node`` and ``cluster up`` always give it)."""
    internal_port: int = 0
    mode: str = MODE_EVENTUAL
    internal_secret: str = ""
    idle_timeout_s: float = 120.0
    unfinished_frames_bytes_max: int = UNFINISHED_FRAMES_BYTES_MAX
    """Public port: bytes of unfinished frames held over all connections."""
    frame_deadline_s: float = FRAME_DEADLINE_S
    """Public port: how long a started frame may take to arrive."""
    connections_per_address_max: int = CONNECTIONS_PER_ADDRESS_MAX
    """Public port: connections one remote address may hold."""
    notify_min_broker_id_changed: bool = False
    clock_offset_ms: int = 0
    """Shifts this node's wall clock (experiments give nodes skewed clocks)."""
    ready_file: Path | None = None
    drain_timeout_s: float = DRAIN_TIMEOUT_S
    raft: RaftOptions | None = None
    scan_interval_ms: int = 0
    """0: scans come from Celery beat; > 0: the gateway also scans itself this often
    (fast failure detection; in raft mode only the leader's scan proposes)."""
    scan_fallback_s: float = 0
    """Eventual mode: the period of the external (Celery beat) scans. When none has
    arrived for three such periods, the gateway scans itself every ``scan_fallback_s``
    and raises an alarm until one arrives again. 0: off. Ignored in raft mode and
    with ``scan_interval_ms`` (the gateway scans itself anyway)."""
    kv_config_file: Path | None = None
    """Eventual mode: where KV config is persisted across restarts (None: not at all)."""
    config_store_file: Path | None = None
    """Eventual mode (``configStorePath``): where accepted UPDATE_NAMESRV_CONFIGs are
    persisted and reloaded from at start (None: not at all)."""
    beat_scan_period_ms: int = 0
    """The period of the external (Celery beat) scans of this node, reported as its
    ``scanNotActiveBrokerInterval`` when it does not scan itself (0: none)."""
    namesrv_properties: Mapping[str, str] = field(default_factory=dict)
    """NamesrvConfig properties by their Java names (upstream's ``-c`` file)."""
    acl_enabled: bool = True
    """False only when an operator turns the remoting ACL off (``--no-acl``)."""
    acl_file: Path | None = None
    """The accounts file (plain_acl.yml style); None: no accounts, so admin codes are
    refused and only loopback peers may send broker codes unsigned."""
    metrics_port: int = 0
    """The Prometheus metrics port (``GET /metrics``, gateway/metrics.py); 0: no metrics."""
    metrics_host: str | None = None
    """Where the metrics port listens; None: ``host`` (loopback if ``host`` is a wildcard)."""
    read_front: bool = False
    """Serve the public port from a read front process (gateway/front.py): route reads
    then never wait for the apply path. False: this process serves the port itself."""
    tls_config_file: Path | None = None
    """The public port's TLS (a tls.properties, remoting/tls.py); None: plain only."""
    below_front_nice: int = 0
    """With a read front: how many steps of nice value this process runs below it once
    the front is up (0: the same priority). When the host's cores are all busy, the
    kernel then gives route reads the larger share (5 steps: about three to one), so
    a registration storm or a large table's first registration slows route answers
    less; registrations and Raft still get a quarter of a busy core, never nothing
    (docs/BENCHMARKS.md, "registration storm")."""
    restore_state_file: Path | None = None
    """A backup (raftstore/backup.py) to start a new cluster from: honoured only into an
    empty Raft folder (raft) or an empty node (eventual); see gateway/restore.py."""

    def raft_addr(self) -> str | None:
        """This node's Raft identity, None outside raft mode."""
        return None if self.raft is None else f"{self.raft.host or self.host}:{self.raft.port}"


def scan_fallback_period_s(options: GatewayOptions, mode: str) -> float:
    """The scan fallback's period for a gateway in ``mode``: 0 (off) in raft mode and
    when the gateway scans itself anyway (``scan_interval_ms``); GatewayConfigError
    when ``scan_fallback_s`` is negative or not a number."""
    period = options.scan_fallback_s
    if not isinstance(period, int | float) or not math.isfinite(period) or period < 0:
        raise GatewayConfigError(f"scan_fallback_s must be >= 0 seconds (0: off), got {period}")
    if mode != MODE_EVENTUAL or options.scan_interval_ms > 0:
        return 0.0
    return float(period)
