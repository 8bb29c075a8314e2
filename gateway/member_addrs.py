"""Raft mode: where each member's remoting port is, so every node can serve the address
server (``GET /rocketmq/nsaddr``, docs/RAFT.md "Members' remoting addresses").

The Raft membership names members by their Raft address; clients and brokers need
the remoting address. A member added on another host is known to the others only
by its Raft address, so each member records its own remoting address in the
replicated state: the KV namespace :data:`MEMBER_ADDRS_NAMESPACE`, key = the member's
Raft address, value = its advertised remoting ``host:port``. It is an ordinary
PUT_KV_CONFIG command (deterministic, in the log and in every snapshot), as upstream
keeps its own ORDER_TOPIC_CONFIG in the KV config.

* :func:`publish_loop` runs on every member told its address (``--remoting-advertise``,
  which ``run_node`` and ``cluster up`` always give a raft gateway; a gateway started by
  hand without it records nothing, so a test's gateway on a port picked at each start
  does not rewrite the state at every restart): once a second it compares its record
  with that address and proposes the record when it differs or is missing (after it
  joined, after an operator deleted it, after a restore). The leader also deletes the
  records of non-members whenever the membership it sees changes.
* :func:`member_addrs` is what the internal MEMBER_ADDRS request answers: the members
  and the records of those members, a read of a few keys, never the whole namespace.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from gateway.private_codes import MEMBERS_MAX
from gateway.services import NameServerService
from raftstore.raft import RaftReplicator
from raftstore.replicator import Replicator
from raftstore.route_table import RouteTable
from remoting.limits import RefusalLog

log = logging.getLogger(__name__)

MEMBER_ADDRS_NAMESPACE = "NAMESRV_MEMBER_ADDRS"
"""KV namespace of the members' remoting addresses (key: Raft address)."""
PUBLISH_PERIOD_S = 1.0
"""How often a member checks its own record: a new member is listed about a second
after it joined."""
FAILURE_LOG_INTERVAL_S = 60.0
"""One line a minute while publishing fails (no quorum, a full KV quota)."""
PRUNED_PER_ROUND_MAX = 16
"""Records of non-members the leader deletes per round (the rest in the next rounds)."""


def member_addrs(replicator: Replicator) -> dict[str, Any]:
    """``{"members": [raft addr, ...], "remoting": {raft addr: recorded remoting addr}}``:
    the current Raft members (none outside raft mode) and the records they published."""
    if not isinstance(replicator, RaftReplicator):
        return {"members": [], "remoting": {}}
    members = sorted(replicator.members())[:MEMBERS_MAX]

    def read(table: RouteTable) -> dict[str, str]:
        found = {m: table.kv_get(MEMBER_ADDRS_NAMESPACE, m) for m in members}
        return {m: addr for m, addr in found.items() if addr}

    return {"members": members, "remoting": replicator.read(read)}


async def publish_loop(
    service: NameServerService, replicator: RaftReplicator, remoting_addr: str
) -> None:
    """Keep this member's record equal to ``remoting_addr``; as leader, drop the records
    of non-members. Failures are logged once a minute and tried again next round."""
    own = replicator.self_addr
    failures = RefusalLog(lines_max=1, interval_s=FAILURE_LOG_INTERVAL_S, logger=log)
    pruned_for: tuple[str, ...] | None = None
    while True:
        members = replicator.members()
        # Only a member with a leader to propose to: not yet added, or removed, it waits.
        if own in members and replicator.leadership()[0] is not None:
            try:
                await _publish_own(service, replicator, own, remoting_addr)
                leads = replicator.is_leader()
                if leads and members != pruned_for and await _prune(service, replicator, members):
                    pruned_for = members
                failures.reset()
            except Exception as exc:
                # No quorum, a leadership change, the KV quota: the next round tries again.
                failures.warning(
                    time.monotonic(), "publishing %s's remoting address failed: %s", own, exc
                )
        await asyncio.sleep(PUBLISH_PERIOD_S)


async def _publish_own(
    service: NameServerService, replicator: RaftReplicator, own: str, remoting_addr: str
) -> None:
    recorded = replicator.read(lambda t: t.kv_get(MEMBER_ADDRS_NAMESPACE, own))
    if recorded == remoting_addr:
        return
    await service.put_kv(namespace=MEMBER_ADDRS_NAMESPACE, key=own, value=remoting_addr)
    log.info("recorded %s's remoting address %s for the address server", own, remoting_addr)


async def _prune(
    service: NameServerService, replicator: RaftReplicator, members: tuple[str, ...]
) -> bool:
    """Delete up to :data:`PRUNED_PER_ROUND_MAX` records of non-members; True when none
    is left."""

    def strangers(table: RouteTable) -> list[str]:
        recorded = table.kv_list(MEMBER_ADDRS_NAMESPACE)
        keys = () if recorded is None else recorded.table
        return [key for key in keys if key not in members]

    gone = replicator.read(strangers)
    for key in gone[:PRUNED_PER_ROUND_MAX]:
        await service.delete_kv(namespace=MEMBER_ADDRS_NAMESPACE, key=key)
        log.info("dropped the remoting address of %s: no longer a raft member", key)
    return len(gone) <= PRUNED_PER_ROUND_MAX
