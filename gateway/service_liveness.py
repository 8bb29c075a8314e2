"""The liveness scan of :class:`gateway.services.NameServerService`: expiring silent
brokers, telling the scan's observers, and unregistering what a closed connection held.

A mixin, so every method stays callable on the service; it proposes through the
service's ``_propose`` and reads the attributes the service's ``__init__`` sets.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from gateway.broker_holds import BrokerHolds
from gateway.clock import Clock
from gateway.expiry_reports import KIND_CHANNEL_CLOSE, ExpiryReports, RaftPosition
from gateway.scan_fallback import (
    ROLE_FOLLOWER,
    ROLE_LEADER,
    ROLE_STANDALONE,
    ScanObserver,
    ScanOutcome,
)
from gateway.service_checks import BROKER_ID_MAX, _check_int
from raftstore import commands as cmd
from raftstore.raft import RaftReplicator
from raftstore.replicator import MODE_RAFT, Replicator
from raftstore.results import ApplyResult, ExpireOutcome

# The service's own logger: its scan and close messages keep their name.
log = logging.getLogger("gateway.services")


class LivenessScan:
    """The scan and the connection-close half of the service (docs/RAFT.md, Liveness)."""

    replicator: Replicator
    clock: Clock
    expiry_reports: ExpiryReports
    holds: BrokerHolds
    skew_allowance_ms: int
    failover_lag_bytes_max: int | None
    before_scan: Callable[[], Awaitable[None]] | None
    scan_observers: list[ScanObserver]

    if TYPE_CHECKING:

        async def _propose(self, command: cmd.Command) -> ApplyResult: ...

    async def expire_brokers(
        self, now_ms: int | None = None, *, skew_allowance_ms: int = 0
    ) -> ExpireOutcome:
        """The liveness scan: drop brokers silent longer than their timeout."""
        stamp = self.clock.now_ms() if now_ms is None else now_ms
        command = cmd.ExpireBrokers(
            now_ms=_check_int("now_ms", stamp, low=0, high=BROKER_ID_MAX),
            skew_allowance_ms=_check_int(
                "skew_allowance_ms", skew_allowance_ms, low=0, high=BROKER_ID_MAX
            ),
        )
        outcome = (await self._propose(command)).outcome
        return outcome if isinstance(outcome, ExpireOutcome) else ExpireOutcome()

    async def scan(self, now_ms: int | None = None) -> ScanOutcome:
        """The periodic liveness scan in this node's mode.

        Eventual: expire this node's own table. Raft: only the node that believes
        it leads proposes one ExpireBrokers with the skew allowance; a follower
        answers nothing expired (role ``follower``). Every :attr:`scan_observers` is
        told the outcome, or the exception, which is raised again.
        """
        try:
            outcome = await self._scan(now_ms)
        except Exception as exc:
            self._tell_scan_observers(exc)
            raise
        self._tell_scan_observers(outcome)
        return outcome

    def _tell_scan_observers(self, result: ScanOutcome | Exception) -> None:
        for observer in self.scan_observers:
            try:
                observer(result)
            except Exception:
                # Watching a scan must not change what the scan answers.
                log.exception("scan observer failed")

    async def _scan(self, now_ms: int | None) -> ScanOutcome:
        stamp = _check_int(
            "now_ms", self.clock.now_ms() if now_ms is None else now_ms, low=0, high=BROKER_ID_MAX
        )
        if isinstance(self.replicator, RaftReplicator) and not self.replicator.is_leader():
            return ScanOutcome(expired=(), role=ROLE_FOLLOWER)
        if self.before_scan is not None:
            await self.before_scan()
        started_us = self.expiry_reports.clock_us()
        # Proposed through _propose, so only the leader, which proposed the scan,
        # sends the elected groups their NOTIFY_MIN_BROKER_ID_CHANGE.
        result = await self._propose(
            cmd.ExpireBrokers(
                now_ms=stamp,
                skew_allowance_ms=(
                    self.skew_allowance_ms if self.replicator.mode == MODE_RAFT else 0
                ),
                failover_lag_bytes_max=self.failover_lag_bytes_max,
            )
        )
        role = ROLE_LEADER if self.replicator.mode == MODE_RAFT else ROLE_STANDALONE
        outcome = result.outcome
        if not isinstance(outcome, ExpireOutcome):
            return ScanOutcome(expired=(), role=role)
        if outcome.expired or outcome.elections:
            # Only a scan that changed something is journaled: only it reads the index.
            self.expiry_reports.record(
                started_us,
                outcome.expired,
                elections=outcome.elections,
                raft=self._raft_position(result),
            )
        for election in outcome.elections:
            log.warning(
                "raft failover: %s elected %s (was id %d) to replace %s",
                election.broker_name,
                election.new_master_addr,
                election.previous_broker_id,
                election.old_master_addr,
            )
        return ScanOutcome(expired=outcome.expired, role=role, elections=outcome.elections)

    async def channel_destroyed(self, channel: str | None) -> None:
        """A connection closed: unregister what was registered over it (eventual mode).

        A None channel is tolerated and does nothing (BrokerHousekeepingService).
        The connection's holds end first; an entry another open connection registered
        at the same address passes to that connection and stays (broker_holds rule 3),
        the other entries it held are unregistered. A connection that held nothing
        unregisters the entry whose channel it is, as upstream's onChannelDestroy.
        In raft mode the close is this node's local observation only: nothing is
        proposed, the replicated timeout decides (docs/RAFT.md, Liveness rule 1).
        """
        if not channel:
            return
        released = self.holds.release(channel)
        if released.handed_over:
            entries = ", ".join(f"{name} id {bid}" for name, bid in released.handed_over)
            log.info(
                "broker channel %s closed: %s now held by a newer connection of the same address",
                channel,
                entries,
            )
        if self.replicator.mode == MODE_RAFT:
            log.info("broker channel %s closed: local observation, nothing replicated", channel)
            return
        started_us = self.expiry_reports.clock_us()
        if released.dropped:
            # What it held, by name: the table may name another channel for an entry
            # this connection took over from an older one.
            result = await self._propose(cmd.UnregisterBrokers(requests=released.dropped))
        elif not released.handed_over:
            result = await self._propose(cmd.ChannelDestroyed(channel=channel))
        else:
            return
        # No client asked for it: the node's journal keeps it (gateway.expiry_reports).
        self.expiry_reports.record(
            started_us,
            sorted(result.changes.live_brokers, key=lambda i: (i.cluster_name, i.broker_addr)),
            kind=KIND_CHANNEL_CLOSE,
        )

    def _raft_position(self, result: ApplyResult) -> RaftPosition | None:
        """Raft mode: the index and term of the log entry that carried a command this
        node just committed, as the apply thread handed them out with the result, and
        the table version the command left (``gateway.expiry_reports``); None in
        eventual mode."""
        if not result.log_index:
            return None
        return RaftPosition(result.log_index, result.log_term, result.applied_version)
