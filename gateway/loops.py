"""The loops a gateway runs beside its servers: its own liveness scans, the scan
fallback, and the watch on Raft leadership that tells the consoles."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from gateway.scan_fallback import ScanFallback
from gateway.services import NameServerService
from raftstore.raft import RaftReplicator

log = logging.getLogger(__name__)

LEADERSHIP_POLL_S = 0.5
"""How often a raft gateway looks for a leader or term change to tell the consoles."""

LeaderPublisher = Callable[[str, str | None, int], None]
"""Told (node id, leader address or None, term) when a raft node sees leadership change."""


async def watch_leadership(
    replicator: RaftReplicator, node_id: str, publisher: LeaderPublisher
) -> None:
    """Tell the consoles when this node sees a new leader or term (or loses the leader).

    Polled off the apply thread: the Raft view is refreshed every 50 ms and
    reading it costs nothing, while a callback on PySyncObj's tick thread could
    stall replication behind a slow channel layer.
    """
    seen: tuple[str | None, int] | None = None
    while True:
        current = replicator.leadership()
        if current != seen:
            seen = current
            try:
                await asyncio.to_thread(publisher, node_id, *current)
            except Exception:
                log.exception("leader-change publisher failed")
        await asyncio.sleep(LEADERSHIP_POLL_S)


async def scan_loop(service: NameServerService, interval_s: float) -> None:
    """The gateway's own liveness scan every ``interval_s``; failures only logged."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            await service.scan()
        except Exception as exc:
            # No quorum or a leadership change: the next round tries again.
            log.info("liveness scan failed: %s", exc)


async def scan_fallback_loop(service: NameServerService, fallback: ScanFallback) -> None:
    """Scan here every period while no external scan arrives (``scan_fallback_s``).

    The same :meth:`NameServerService.scan` as the internal request, stamped by the
    gateway's clock; failures are only logged, as the scan loop's are.
    """
    while True:
        wait_s = fallback.seconds_until_due()
        if wait_s > 0:
            await asyncio.sleep(wait_s)
            continue
        fallback.begin_run()
        try:
            await service.scan()
        except Exception as exc:
            log.info("fallback liveness scan failed: %s", exc)
        await asyncio.sleep(fallback.period_s)
