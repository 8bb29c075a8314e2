"""This node's journal of the state changes no client request asked for.

Every route change a NameServer makes on its own is kept here, numbered, with when it
started and when its outcome came back, on this host's wall clock in microseconds:

* ``expire``: a liveness scan that expired live brokers (raft: the leader's one
  committed ExpireBrokers; eventual: this node's own table), with the master elections
  the same scan made (raft failover) when it made some;
* ``channel_close``: eventual mode's unregistration of what a closed broker connection
  held (``NameServerService.channel_destroyed``; raft mode proposes nothing then).

The journal also says when it began (``started_us``: when this gateway started): an
eventual node's table begins empty then, so whatever it held before a restart is gone
(a restarted raft node replays its log instead).

In raft mode an entry also carries where its command sits in the Raft log: the index
and term of the log entry that carried it (``raft_index``, ``raft_term``), which the
apply thread hands out with each result (``raftstore.raft.applier``), and the table
version the command left (``applied_version``, the same on every node).

NODE_STATUS carries the journal (``expiries``, the name it had when it held scans only),
so an operator sees what the node did by itself, and the consistency experiments record
each entry as the write it is (``NodeJournals.collect``), instead of
inferring it from the routes. The journal is bounded: a reader polling every second sees
every entry.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from raftstore.results import BrokerAddrInfo, MasterElection

EXPIRY_REPORTS_MAX = 64
"""Journal entries kept; a reader polling every second sees each of them."""

KIND_EXPIRE = "expire"
"""A liveness scan expired live brokers."""
KIND_CHANNEL_CLOSE = "channel_close"
"""Eventual mode: a closed broker connection unregistered what it held."""
JOURNAL_KINDS = (KIND_EXPIRE, KIND_CHANNEL_CLOSE)


@dataclass(frozen=True, slots=True)
class RaftPosition:
    """Where a committed command sits in the Raft log (the index and term of the entry
    that carried it) and the table version of the state it left."""

    index: int
    term: int
    applied_version: int


@dataclass(frozen=True, slots=True)
class ExpiryReport:
    """One journal entry: a change this node made that no client request asked for.
    ``expired``: the live-table entries it removed; ``committed_us``: when its outcome
    came back on this node (applied here)."""

    seq: int
    started_us: int
    committed_us: int
    expired: tuple[BrokerAddrInfo, ...]
    kind: str = KIND_EXPIRE
    elections: tuple[MasterElection, ...] = ()
    raft: RaftPosition | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON form NODE_STATUS carries."""
        entry: dict[str, Any] = {
            "seq": self.seq,
            "kind": self.kind,
            "started_us": self.started_us,
            "committed_us": self.committed_us,
            "expired": [
                {"cluster": info.cluster_name, "addr": info.broker_addr} for info in self.expired
            ],
        }
        if self.elections:
            entry["elections"] = [
                {
                    "broker_name": e.broker_name,
                    "new_master_addr": e.new_master_addr,
                    "old_master_addr": e.old_master_addr,
                }
                for e in self.elections
            ]
        if self.raft is not None:
            entry["raft_index"] = self.raft.index
            entry["raft_term"] = self.raft.term
            entry["applied_version"] = self.raft.applied_version
        return entry


def wall_us() -> int:
    """This host's wall clock in microseconds."""
    return time.time_ns() // 1_000


class ExpiryReports:
    """The bounded, numbered journal of this node's own changes (the name is from when it
    kept expiring scans only)."""

    def __init__(self, clock_us: Callable[[], int] = wall_us) -> None:
        self.clock_us = clock_us
        self._reports: deque[ExpiryReport] = deque(maxlen=EXPIRY_REPORTS_MAX)
        self._seq = 0
        self.started_us = clock_us()
        """When the journal began: this gateway's start."""

    def record(
        self,
        started_us: int,
        expired: Sequence[BrokerAddrInfo],
        *,
        kind: str = KIND_EXPIRE,
        elections: Iterable[MasterElection] = (),
        raft: RaftPosition | None = None,
    ) -> None:
        """A change of ``kind`` that began at ``started_us`` has just removed ``expired``
        (and made ``elections``); nothing is kept for one that changed nothing."""
        elected = tuple(elections)
        if not expired and not elected:
            return
        self._seq += 1
        self._reports.append(
            ExpiryReport(
                self._seq, started_us, self.clock_us(), tuple(expired), kind, elected, raft
            )
        )

    def snapshot(self) -> list[dict[str, Any]]:
        """The kept entries, oldest first."""
        return [report.as_dict() for report in self._reports]
