"""Raft membership changes: one member added or removed at a time, through
PySyncObj's dynamic membership (its public API), refused when unsafe."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from pysyncobj.config import FAIL_REASON

from raftstore.raft.glue import FAIL_NAMES, RouteLog
from raftstore.replicator import NoQuorumError, ReplicationError


class MembershipError(ReplicationError):
    """A membership change was refused (unsafe now) or failed."""


class Membership:
    """Adds and removes members of one node's cluster, one change at a time."""

    def __init__(
        self, self_addr: str, timeout_s: float, require_started: Callable[[], RouteLog]
    ) -> None:
        self._self_addr = self_addr
        self._timeout_s = timeout_s
        self._require_started = require_started
        self.pending = False

    async def add(self, addr: str, members: Sequence[str], has_quorum: bool) -> None:
        """Add ``addr`` to ``members`` (start it first with the current members as peers)."""
        if addr in members:
            raise MembershipError(f"{addr} is already a member")
        if not has_quorum:
            raise MembershipError("refusing to add a member without quorum")
        await self._change("add", addr)

    async def remove(self, addr: str, members: Sequence[str]) -> None:
        """Remove ``addr`` from ``members`` (not this node: ask another member)."""
        if addr not in members:
            raise MembershipError(f"{addr} is not a member")
        if addr == self._self_addr:
            raise MembershipError("a node does not remove itself; ask another member")
        if len(members) - 1 < 1:
            raise MembershipError("refusing to shrink the cluster below one member")
        await self._change("remove", addr)

    async def _change(self, action: str, addr: str) -> None:
        sync = self._require_started()
        if self.pending:
            raise MembershipError("another membership change is pending")
        self.pending = True
        loop = asyncio.get_running_loop()
        done: asyncio.Future[int] = loop.create_future()

        def on_result(_result: object, error: int) -> None:
            loop.call_soon_threadsafe(_set_if_pending, done, error)

        try:
            if action == "add":
                sync.addNodeToCluster(addr, callback=on_result)
            else:
                sync.removeNodeFromCluster(addr, callback=on_result)
            try:
                error = await asyncio.wait_for(done, self._timeout_s)
            except TimeoutError as exc:
                raise NoQuorumError(f"membership change {action} {addr} not committed") from exc
            if error != FAIL_REASON.SUCCESS:
                raise MembershipError(
                    f"{action} {addr} refused: {FAIL_NAMES.get(error, error)} (a change may "
                    f"be pending on the leader, or its first entry is not committed yet)"
                )
        finally:
            self.pending = False


def _set_if_pending(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)
