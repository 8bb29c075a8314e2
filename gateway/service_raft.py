"""The Raft membership and log operations of :class:`gateway.services.NameServerService`
(the internal port's and the console's admin calls); each refuses outside raft mode.

A mixin, so every method stays callable on the service.
"""

from __future__ import annotations

from gateway.service_checks import ServiceError, _check_addr
from raftstore.raft import RaftReplicator
from raftstore.replicator import Replicator

REMARK_NOT_RAFT = "not in raft mode"


class RaftAdmin:
    """Adds and removes members, compacts the log, reads the digest checkpoints."""

    replicator: Replicator

    def _raft(self) -> RaftReplicator:
        if not isinstance(self.replicator, RaftReplicator):
            raise ServiceError(REMARK_NOT_RAFT)
        return self.replicator

    async def add_raft_member(self, addr: str) -> None:
        """Add a Raft member (start it first with the current members as peers).

        ServiceError outside raft mode or for a malformed address; MembershipError
        when the change is refused (pending change, no quorum, already a member).
        """
        await self._raft().add_node(_check_addr(addr))

    async def remove_raft_member(self, addr: str) -> None:
        """Remove a Raft member (ask another member to remove this one)."""
        await self._raft().remove_node(_check_addr(addr))

    def compact_raft_log(self) -> None:
        """Raft mode: snapshot the table and compact the journal at the next tick."""
        self._raft().force_snapshot()

    def digest_checkpoints(self) -> dict[int, str]:
        """Raft mode: the state digest every 128th log index (divergence checks)."""
        return self._raft().digest_checkpoints()
