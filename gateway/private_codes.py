"""Every private request code in one place: far above RocketMQ's codes, so a misdirected
client cannot hit one by accident, and answered only where they are meant to be.

* :class:`InternalCode`: the node's own processes (the Celery scan, the web process, the
  launcher) to their gateway, on its loopback-only internal port, with the node's secret
  (:mod:`gateway.internal`).
* :data:`FRONT_PEER_CODE` and :data:`FRONT_STATS_CODE`: the read front to its gateway, on
  the gateway's Unix socket only (:mod:`gateway.front`); on the public port they are
  unknown codes like any other.

Kept free of other imports: the read front, a light process, imports it too.
"""

from __future__ import annotations

from enum import IntEnum, unique


@unique  # two codes given one number would silently become aliases of each other
class InternalCode(IntEnum):
    """Requests only the node's own processes send (the internal port)."""

    SCAN_NOT_ACTIVE_BROKER = 40001
    """The liveness scan at ext ``now_ms`` (default: the gateway's clock). Answers the
    number of expired live entries in ext ``expired``; in raft mode also ext ``role``
    (``leader`` proposed the one ExpireBrokers, ``follower`` skipped and says 0).
    Each one tells the scan fallback that the external scans still arrive."""
    NODE_STATUS = 40002
    """A JSON body: the replicator status (raft: RaftStatus, members, peers with match
    index) plus ``routes_version``, ``alarms`` (raft safety alarms, and the scan
    fallback's while this node scans itself) and ``scan_fallback`` (its state). Ext
    ``consistency=linearizable`` commits a barrier first, so applied_index covers
    everything committed before the call. Ext ``brokers=1`` adds ``brokers``: every
    broker replica the node knows and the age of its last heartbeat by the node's
    own clock (``gateway.selectors.broker_views``; the console's node x broker matrix)."""
    RAFT_ADD_NODE = 40003
    """Add the Raft member in ext ``addr``: 0, or SYSTEM_ERROR with the refusal."""
    RAFT_REMOVE_NODE = 40004
    """Remove the Raft member in ext ``addr``: 0, or SYSTEM_ERROR with the refusal."""
    DIGEST_CHECKPOINTS = 40005
    """A JSON body ``{"<log index>": "<digest>"}`` (raft only): compare across nodes."""
    RAFT_COMPACT_LOG = 40006
    """Raft only: snapshot the table and compact the log at the next tick (operators,
    and tests that need a restart to go through a snapshot)."""
    BACKUP = 40007
    """The body is a backup file (raftstore/backup.py) of this node's state, named for the
    cluster in ext ``cluster``: in raft mode read after a barrier committed through the
    log (a linearizable point), with the log index and term; in eventual mode the node's
    own state. SYSTEM_ERROR with the reason when it cannot be taken (no quorum). Ext
    ``consistency=local``: raft mode reads the node's applied state without a barrier
    (recovery after quorum loss; the header's ``source`` says so)."""
    MEMBER_ADDRS = 40020
    """A JSON body ``{"members": [raft addr], "remoting": {raft addr: remoting addr}}``:
    the Raft members and the remoting addresses they recorded (gateway/member_addrs.py;
    empty outside raft mode). The web process's address server asks it. Numbered
    apart from the codes above, which grow one by one."""


MEMBERS_MAX = 64
"""Members a MEMBER_ADDRS answer names at most (a Raft cluster has a handful)."""

STATUS_BROKERS_FIELD = "brokers"
STATUS_BROKERS_WANTED = "1"
"""NODE_STATUS ext ``brokers=1``: the status answer includes ``brokers``."""

FRONT_PEER_CODE = 99_876
"""The first frame on a front's link: ``extFields.peer`` = the client's ``host:port``.
Accepted only on the gateway's Unix socket, and only once per link."""
PEER_FIELD = "peer"
PEER_SUBJECT_FIELD = "peerSubject"
"""With ``PEER_FIELD``: the subject of the client's verified TLS certificate (the front
relays TLS connections, so only it sees the certificate)."""
FRONT_STATS_CODE = 99_877
"""One-way, on the front's own link: ``extFields.routeAnswers`` = route queries answered
from copies since the last report (the gateway's metrics count them)."""
ROUTE_ANSWERS_FIELD = "routeAnswers"
