"""What a raft node tells about itself: its status fields, the view of PySyncObj it
refreshes on the tick thread, the gaps between its ticks, its contact with a quorum
and its safety alarms."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from raftstore.raft.glue import STATE_NAMES, RouteLog
from raftstore.raft.transport import PORT_LISTENING
from raftstore.replicator import NoQuorumError, PeerStatus, ReplicatorStatus

logger = logging.getLogger("raftstore.raft")

ALARMS_KEPT = 32
LONG_TICK_GAP_S = 0.25
"""Tick gaps longer than this are counted: near half the shortest election timeout
(0.6 s), a follower is close to starting an election."""


@dataclass(frozen=True, slots=True)
class RaftStatus(ReplicatorStatus):
    """:class:`ReplicatorStatus` plus what only raft mode knows."""

    self_addr: str = ""
    members: tuple[str, ...] = ()
    ready: bool = False
    membership_pending: bool = False
    alarms: tuple[str, ...] = ()
    resends_trimmed: int = 0
    tick_gap_max_ms: float = 0.0
    """The longest time between two ends of PySyncObj ticks since start: heartbeats
    leave from ticks, so gaps near the election timeout cost elections."""
    long_tick_gaps: int = 0
    """Gaps between ticks longer than :data:`LONG_TICK_GAP_S`."""
    apply_slices_cut: int = 0
    """Ticks that left committed entries for the next one (``apply_slice_s``)."""
    raft_port: str = PORT_LISTENING
    """This node's Raft port: ``listening``, ``paused`` (bound, accepting again after a
    short pause: the process ran out of descriptors) or ``not listening`` (peers cannot
    connect; the node binds it again every ``bind_retry_s``). Alarmed unless listening."""
    raft_accept_pauses: int = 0
    """Times the Raft port stopped accepting for a while after a failed accept."""
    quorum_contact: bool = False
    """This node has heard from a quorum within the election timeout
    (:class:`QuorumContact`); without it every write is refused."""
    quorum_silence_ms: float | None = None
    """Time since it last had that contact; None: never since it started."""


@dataclass(slots=True)
class RaftView:
    """What the tick thread last read from PySyncObj's getStatus()."""

    state: str = "follower"
    leader: str | None = None
    term: int = 0
    commit_index: int = 0
    log_length: int = 0
    has_quorum: bool = False
    peers: tuple[PeerStatus, ...] = ()
    members: tuple[str, ...] = ()
    ready: bool = False
    at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def read_view(
    sync: RouteLog, self_addr: str, previous: RaftView, node_id: str, tick_gap_max_s: float
) -> RaftView:
    """PySyncObj's status as a :class:`RaftView`; a term change since ``previous`` is
    logged (an election), with the longest tick gap so far."""
    raw = sync.getStatus()
    others = sorted(node.id for node in sync.otherNodes)
    peers = tuple(
        PeerStatus(
            address=addr,
            connected=raw.get(f"partner_node_status_server_{addr}") == 2,
            match_index=int(raw.get(f"match_idx_server_{addr}", -1)),
            next_index=int(raw.get(f"next_node_idx_server_{addr}", -1)),
        )
        for addr in others
    )
    leader = raw.get("leader")
    term = int(raw["raft_term"])
    if term != previous.term and previous.term:
        logger.warning(
            "raft term %d -> %d on %s (%s, leader %s); longest tick gap so far %.0f ms",
            previous.term,
            term,
            node_id,
            STATE_NAMES.get(raw["state"], raw["state"]),
            leader and leader.id,
            tick_gap_max_s * 1000.0,
        )
    return RaftView(
        state=STATE_NAMES.get(raw["state"], str(raw["state"])),
        leader=None if leader is None else str(leader.id),
        term=term,
        commit_index=int(raw["commit_idx"]),
        log_length=int(raw["log_len"]),
        has_quorum=bool(raw["has_quorum"]),
        peers=peers,
        members=tuple(sorted([self_addr, *others])),
        ready=bool(sync.isReady()),
        at=time.monotonic(),
    )


class TickGaps:
    """The time between the ends of PySyncObj's ticks (tick thread only)."""

    def __init__(self) -> None:
        self.max_s = 0.0
        self.long_gaps = 0
        self._last_s: float | None = None

    def tick(self, now_s: float) -> bool:
        """Count the gap since the previous tick; False on the first tick."""
        last_s, self._last_s = self._last_s, now_s
        if last_s is None:
            return False
        gap_s = now_s - last_s
        if gap_s > self.max_s:
            self.max_s = gap_s
        if gap_s > LONG_TICK_GAP_S:
            self.long_gaps += 1
        return True


class Alarms:
    """A node's safety alarms (the last :data:`ALARMS_KEPT`), raised from any thread."""

    def __init__(self, node_id: str) -> None:
        self._node_id = node_id
        self._lock = threading.Lock()
        self._messages: list[str] = []

    def raise_alarm(self, message: str) -> None:
        """Log ``message`` as an error and keep it for the status."""
        logger.error("raft safety alarm on %s: %s", self._node_id, message)
        with self._lock:
            self._messages.append(message)
            del self._messages[:-ALARMS_KEPT]

    def current(self) -> tuple[str, ...]:
        """The alarms kept, oldest first."""
        with self._lock:
            return tuple(self._messages)


REMARK_NO_QUORUM = "no quorum: this node has not heard from a majority"


TICK_LATE_S = 0.25
"""A tick thread that has begun no tick for this long (a dozen tick periods) is running late:
only then is a proposal's silence counted to its last tick. A tick on time is judged by the
clock, so a node cut off refuses the moment the window has passed."""


class QuorumContact:
    """When this node last had contact with a quorum (docs/RAFT.md, "A node without a
    quorum says so").

    The tick thread writes two floats per tick (:meth:`observe`); the request path
    compares them with the clock (:meth:`refusal`): no lock, no call into PySyncObj.
    Contact is lost once ``window_s`` has passed since the leader last heard from a
    majority, or since a follower's election deadline last lay ahead.
    """

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._at_s = 0.0  # 0: never since this node started
        self._tick_s = 0.0

    def observe(self, contact_at_s: float | None, tick_s: float) -> None:
        """Tick thread: record what :meth:`RouteLog.quorum_contact_at` said in the tick
        that began at ``tick_s``. The tick's start, not now: the sockets were last read
        just before it, and a tick that applied for a second has read nothing since."""
        if contact_at_s is not None and contact_at_s > self._at_s:
            self._at_s = contact_at_s
        self._tick_s = tick_s

    def silence_s(self, now_s: float) -> float | None:
        """Seconds since the last contact; None when there never was one."""
        at_s = self._at_s
        return None if at_s == 0.0 else max(0.0, now_s - at_s)

    def has_contact(self, now_s: float) -> bool:
        """True while the last contact is at most ``window_s`` old."""
        at_s = self._at_s
        return at_s != 0.0 and now_s - at_s <= self.window_s

    def refusal(self, now_s: float, *, proposing: bool = False) -> NoQuorumError | None:
        """The error a write gets now, or None while in contact.

        ``proposing``: the write is a proposal, so its commit decides and the propose
        timeout bounds its wait. When the tick thread is late (:data:`TICK_LATE_S`),
        its silence is counted up to the start of its last tick rather than to now: a
        tick thread held up (a large entry applying, no core to run on) has not read the
        messages that keep contact, which says nothing about the quorum, and only the
        tick thread can commit the proposal anyway. A node cut off keeps ticking on
        time, so it refuses as soon as the window has passed. A node that
        never had contact (still starting) lets a proposal wait for a leader. Answers
        from the applied state (no proposal) are judged against the clock."""
        at_s = self._at_s
        if at_s == 0.0:
            return None if proposing else NoQuorumError(f"{REMARK_NO_QUORUM} since it started")
        late = proposing and now_s - self._tick_s > TICK_LATE_S
        silence_s = (self._tick_s if late else now_s) - at_s
        if silence_s <= self.window_s:
            return None
        return NoQuorumError(f"{REMARK_NO_QUORUM} for {silence_s * 1000.0:.0f} ms")

    def alarms(self, now_s: float) -> tuple[str, ...]:
        """The status alarm while out of contact."""
        refusal = self.refusal(now_s)
        if refusal is None:
            return ()
        return ("no raft quorum: " + str(refusal).removeprefix("no quorum: "),)
