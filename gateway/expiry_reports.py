"""The latest broker expiries of this node's scans, as the node reports them.

A scan that expires live brokers (raft: the leader's one committed ExpireBrokers;
eventual: this node's own table) is remembered with when the scan started and when its
outcome came back, on this host's wall clock in microseconds. NODE_STATUS carries them
(``expiries``), so an operator sees what the scans removed, and the consistency
experiments record each raft expiry as the write it is, with the scanning node's times,
instead of inferring it from the routes.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from raftstore.results import BrokerAddrInfo

EXPIRY_REPORTS_MAX = 64
"""Expiring scans kept; a reader polling every second sees each of them."""


@dataclass(frozen=True, slots=True)
class ExpiryReport:
    """One scan that expired live entries."""

    seq: int
    started_us: int
    committed_us: int
    expired: tuple[BrokerAddrInfo, ...]

    def as_dict(self) -> dict[str, Any]:
        """The JSON form NODE_STATUS carries."""
        return {
            "seq": self.seq,
            "started_us": self.started_us,
            "committed_us": self.committed_us,
            "expired": [
                {"cluster": info.cluster_name, "addr": info.broker_addr} for info in self.expired
            ],
        }


def wall_us() -> int:
    """This host's wall clock in microseconds."""
    return time.time_ns() // 1_000


class ExpiryReports:
    """A bounded, numbered record of the scans that expired something."""

    def __init__(self, clock_us: Callable[[], int] = wall_us) -> None:
        self.clock_us = clock_us
        self._reports: deque[ExpiryReport] = deque(maxlen=EXPIRY_REPORTS_MAX)
        self._seq = 0

    def record(self, started_us: int, expired: Sequence[BrokerAddrInfo]) -> None:
        """A scan that began at ``started_us`` has just expired ``expired`` (nothing is
        kept for a scan that expired nothing)."""
        if not expired:
            return
        self._seq += 1
        self._reports.append(ExpiryReport(self._seq, started_us, self.clock_us(), tuple(expired)))

    def snapshot(self) -> list[dict[str, Any]]:
        """The kept reports, oldest first."""
        return [report.as_dict() for report in self._reports]
