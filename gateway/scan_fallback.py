"""The liveness scan's words and its fallback: what one scan did (:class:`ScanOutcome`),
who is told (:data:`ScanObserver`), and :class:`ScanFallback`, which makes a node scan
itself when the external scans (Celery beat) stop. The scan itself is
:meth:`gateway.services.NameServerService.scan`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from raftstore.results import BrokerAddrInfo, MasterElection

log = logging.getLogger(__name__)

ROLE_LEADER = "leader"
ROLE_FOLLOWER = "follower"
ROLE_STANDALONE = "standalone"


@dataclass(frozen=True, slots=True)
class ScanOutcome:
    """What one liveness scan did on this node.

    ``role`` is ``leader`` (raft: this node proposed the one ExpireBrokers),
    ``follower`` (raft: skipped, the leader decides) or ``standalone`` (eventual).
    """

    expired: tuple[BrokerAddrInfo, ...]
    role: str
    elections: tuple[MasterElection, ...] = ()


ScanObserver = Callable[[ScanOutcome | Exception], None]
"""Told each liveness scan's result: its outcome, or the exception it raised (which the
scan then raises again). Called on the event loop thread; it must not block."""


SCAN_FALLBACK_MISSED_PERIODS = 3
"""External scan periods a node waits through, without one scan, before it scans itself."""


class ScanFallback:
    """When the external scans stop, this node scans itself ("no single point for expiry").

    In eventual mode the liveness scan arrives from outside (Celery beat and its
    worker, through Redis, over the internal port) every ``period_s`` seconds. When
    none has arrived for :data:`SCAN_FALLBACK_MISSED_PERIODS` periods, the gateway
    scans on its own every ``period_s`` (the same :meth:`NameServerService.scan`,
    stamped by the gateway's clock) and reports an alarm, until an external scan
    arrives again. Only the proposal side reads time here (a monotonic clock, for
    the silence); the apply path still gets its time inside each command.

    ``period_s`` 0 turns it off (raft mode, or a gateway that scans itself anyway).
    Used from the gateway's event loop only; scrapes read ``active`` and ``runs``.
    """

    def __init__(
        self, period_s: float = 0.0, *, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        if not math.isfinite(period_s) or period_s < 0:
            raise ValueError(f"the scan fallback period must be >= 0 seconds, got {period_s}")
        self.period_s = float(period_s)
        self._monotonic = monotonic
        self._last_external = monotonic()
        self.active = False
        """True while this node scans itself (the alarm is up)."""
        self.runs = 0
        """Scans the fallback ran (failed ones included)."""

    @property
    def enabled(self) -> bool:
        """Whether this node takes over at all."""
        return self.period_s > 0

    @property
    def trigger_after_s(self) -> float:
        """The silence after which the fallback starts scanning."""
        return SCAN_FALLBACK_MISSED_PERIODS * self.period_s

    def silence_s(self) -> float:
        """Seconds since the last external scan (or since the gateway started)."""
        return max(0.0, self._monotonic() - self._last_external)

    def restart(self) -> None:
        """Count the silence from now (the gateway starts listening)."""
        self._last_external = self._monotonic()

    def external_scan(self) -> None:
        """An external scan arrived: stop scanning here and clear the alarm."""
        self._last_external = self._monotonic()
        if self.active:
            self.active = False
            log.warning("scan fallback off: external scans are back, this node stops scanning")

    def seconds_until_due(self) -> float:
        """0 when this node should scan now (for the first time or again), else the wait."""
        return max(0.0, self.trigger_after_s - self.silence_s())

    def begin_run(self) -> None:
        """A fallback scan starts now; the first one since the external scans stopped
        raises the alarm."""
        self.runs += 1
        if not self.active:
            self.active = True
            log.warning("%s", self.alarm())

    def alarm(self) -> str:
        """The alarm text, as NODE_STATUS lists it."""
        return (
            f"scan fallback: no scan from Celery beat for {self.silence_s():.0f} s; "
            f"this node scans itself every {self.period_s:g} s"
        )

    def alarms(self) -> list[str]:
        """The alarm while active, else nothing."""
        return [self.alarm()] if self.enabled and self.active else []

    def status(self) -> dict[str, object]:
        """What NODE_STATUS says about the fallback."""
        return {
            "enabled": self.enabled,
            "active": self.active,
            "period_s": self.period_s,
            "silence_s": round(self.silence_s(), 3),
            "runs": self.runs,
        }
