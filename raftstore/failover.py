"""Raft-mode master failover: the pure election rule applied inside ExpireBrokers.

The original NameServer never chooses a master: when a master goes silent its
group simply loses id 0 until an operator (or the 5.x controller) acts. In raft
mode every node applies the same expiry in the same log position, so the table
can take that decision itself, once, for the whole cluster:

* only groups whose brokers registered with ``enableRaftFailover=true`` take
  part (``BrokerGroup.raft_failover``), and only when the ExpireBrokers command
  carries ``failover_lag_bytes_max`` (raft mode's scan sets it; eventual mode
  never does, so it keeps the original behaviour);
* when such a group's master (id 0) expires, the candidates are its slaves whose
  live entries survive this same scan and *that the master vouched for*: the master's
  last report of its HA links (``Replication.slave_acks``: each authenticated HA
  connection's peer address and the offset it acknowledged) names the address the
  slave reports for its own HA connection (``Replication.client_addr``), and no other
  member of the group claims that connection. A slave's progress is the offset the
  master saw it acknowledge, never what the slave says of itself: a REGISTER_BROKER
  from anyone white-listed could add a slave with any offset, but only a slave that
  passed the HA handshake (its shared secret) appears in the master's report. A
  member claiming another's connection makes neither a candidate (nobody is elected
  rather than a forger);
* a candidate is in sync when the master's last reported max offset minus its
  acknowledged offset is at most ``failover_lag_bytes_max`` (upstream's
  ``haMaxGapNotInSync`` idea; the default below is its 256 MiB);
* the winner has the highest acknowledged offset; ties go to the lowest broker id.
  No master offset, no report, or no candidate in sync means no election.

Like 5.x ``DefaultElectPolicy`` this prefers the most advanced in-sync replica,
without epochs (our classic HA has none) and without unclean elections.
Nothing here reads a clock or iterates in hash order.
"""

from __future__ import annotations

from collections.abc import Collection

from raftstore.results import BrokerAddrInfo, MasterElection
from raftstore.tables import BrokerGroup, BrokerLiveView, Tables
from remoting.model import MASTER_ID

DEFAULT_FAILOVER_LAG_BYTES_MAX = 256 * 1024 * 1024
"""Upstream ``haMaxGapNotInSync`` / ``haSlaveFallbehindMax`` default."""


def elect_master(
    t: Tables,
    group: BrokerGroup,
    expired: Collection[BrokerAddrInfo],
    lag_bytes_max: int,
) -> MasterElection | None:
    """The slave that replaces ``group``'s expiring master, or None.

    ``expired`` holds every live key this scan expires: a slave expiring in the
    same scan is no candidate.
    """
    master_addr = group.broker_addrs.get(MASTER_ID)
    if not group.raft_failover or master_addr is None:
        return None
    master = t.live.get(BrokerAddrInfo(group.cluster, master_addr))
    if master is None or master.max_offset is None:
        return None
    best: tuple[int, int, BrokerLiveView] | None = None
    for broker_id, acked in sorted(vouched_acks(t, group, master).items()):
        key = BrokerAddrInfo(group.cluster, group.broker_addrs[broker_id])
        entry = t.live.get(key)
        if entry is None or key in expired or master.max_offset - acked > lag_bytes_max:
            continue
        # Sorted by id, so only a strictly higher offset replaces the best.
        if best is None or acked > best[0]:
            best = (acked, broker_id, entry)
    if best is None:
        return None
    acked, broker_id, entry = best
    return MasterElection(
        cluster_name=group.cluster,
        broker_name=group.broker_name,
        old_master_addr=master_addr,
        new_master_addr=entry.broker_addr,
        new_master_ha_addr=entry.ha_server_addr,
        previous_broker_id=broker_id,
        master_max_offset=master.max_offset,
        new_master_confirm_offset=acked,
    )


def vouched_acks(t: Tables, group: BrokerGroup, master: BrokerLiveView) -> dict[int, int]:
    """The slaves of ``group`` its ``master`` vouched for, by broker id, with the offset
    the master saw each acknowledge (see the module docstring)."""
    report = master.replication
    if report is None or not report.slave_acks:
        return {}
    acks = dict(report.slave_acks)
    claims: dict[str, list[int]] = {}
    for broker_id, addr in sorted(group.broker_addrs.items()):
        entry = t.live.get(BrokerAddrInfo(group.cluster, addr))
        if broker_id == MASTER_ID or entry is None or entry.replication is None:
            continue
        client = entry.replication.client_addr
        if client is not None and client in acks:
            claims.setdefault(client, []).append(broker_id)
    return {ids[0]: acks[client] for client, ids in claims.items() if len(ids) == 1}


def promote(group: BrokerGroup, election: MasterElection) -> bool:
    """Move the elected slave to id 0; False when the group changed meanwhile."""
    if MASTER_ID in group.broker_addrs:
        return False
    if group.broker_addrs.get(election.previous_broker_id) != election.new_master_addr:
        return False
    del group.broker_addrs[election.previous_broker_id]
    group.broker_addrs[MASTER_ID] = election.new_master_addr
    return True


def slave_id_for(group: BrokerGroup, addr: str) -> int:
    """The slave id a returning old master is told to take: the id its address
    already holds, else the smallest free positive id."""
    for broker_id, held in sorted(group.broker_addrs.items()):
        if held == addr and broker_id != MASTER_ID:
            return broker_id
    candidate = MASTER_ID + 1
    while candidate in group.broker_addrs:
        candidate += 1
    return candidate


def live_master_holder(t: Tables, group: BrokerGroup, addr: str) -> BrokerLiveView | None:
    """The live entry of another broker holding id 0 of a failover group, if any.

    A master registering while that holds is a returning old master: it must
    become a slave (the holder was elected while it was away).
    """
    if not group.raft_failover:
        return None
    holder = group.broker_addrs.get(MASTER_ID)
    if holder is None or holder == addr:
        return None
    return t.live.get(BrokerAddrInfo(group.cluster, holder))
