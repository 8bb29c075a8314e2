"""What a raft node tells about itself: its status fields, the view of PySyncObj it
refreshes on the tick thread, the gaps between its ticks and its safety alarms."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from raftstore.raft.glue import STATE_NAMES, RouteLog
from raftstore.raft.transport import PORT_LISTENING
from raftstore.replicator import PeerStatus, ReplicatorStatus

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
