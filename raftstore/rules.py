"""The write rules of RocketMQ 5.x ``RouteInfoManager`` and ``KVConfigManager``.

Each function mutates :class:`~raftstore.tables.Tables` for one command and
records what it really changed in a :class:`ChangeSet`; a rule that ends where
it started records nothing, so the applied version stays put. Time comes only
from the command (``now_ms``); iteration that could decide an outcome runs in
sorted order, so the same commands give the same state on every node.

REGISTER_BROKER, the one rule that plans its edits before it makes them, lives in
:mod:`raftstore.registration`; the rules here read and write the same tables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from raftstore import failover
from raftstore.commands import (
    ExpireBrokers,
    QueryDataVersion,
    RegisterTopic,
    UnregisterRequest,
)
from raftstore.config import NamesrvConfig
from raftstore.results import (
    BrokerAddrInfo,
    Changes,
    ExpireOutcome,
    KvQuotaExceeded,
    MasterElection,
    MasterMove,
    MinBrokerIdChange,
    QueryDataVersionOutcome,
    Replication,
)
from raftstore.tables import BrokerGroup, Tables
from remoting.model import (
    MASTER_ID,
    PERM_READ,
    PERM_WRITE,
    QueueData,
)


@dataclass(slots=True)
class ChangeSet:
    """Collects the keys one command changed; frozen into :class:`Changes` at the end."""

    topics: set[str] = field(default_factory=set)
    broker_names: set[str] = field(default_factory=set)
    clusters: set[str] = field(default_factory=set)
    live_brokers: set[BrokerAddrInfo] = field(default_factory=set)
    kv: set[tuple[str, str]] = field(default_factory=set)
    kv_namespaces: set[str] = field(default_factory=set)
    config: bool = False
    master_moves: list[MasterMove] = field(default_factory=list)

    def freeze(self) -> Changes:
        """The immutable result value."""
        return Changes(
            topics=frozenset(self.topics),
            broker_names=frozenset(self.broker_names),
            clusters=frozenset(self.clusters),
            live_brokers=frozenset(self.live_brokers),
            kv=frozenset(self.kv),
            kv_namespaces=frozenset(self.kv_namespaces),
            config=self.config,
            master_moves=tuple(self.master_moves),
        )


def min_broker_id_notification(
    group: BrokerGroup, offline_addr: str | None, ha_addr: str | None
) -> tuple[MinBrokerIdChange, ...]:
    """5.x ``notifyMinBrokerIdChanged`` for the group's current members."""
    min_id = group.min_broker_id()
    if min_id is None:
        return ()
    members = sorted(group.broker_addrs.items())
    if offline_addr is not None or len(members) == 1:
        targets = tuple(addr for _, addr in members)
    else:
        targets = tuple(addr for bid, addr in members if bid != min_id)
    return (
        MinBrokerIdChange(
            broker_name=group.broker_name,
            min_broker_id=min_id,
            min_broker_addr=group.broker_addrs[min_id],
            offline_broker_addr=offline_addr,
            ha_broker_addr=ha_addr,
            targets=targets,
        ),
    )


# ---------------------------------------------------------------- unregistration


def unregister_batch(
    t: Tables,
    config: NamesrvConfig,
    requests: Sequence[UnregisterRequest],
    cs: ChangeSet,
    elections: Sequence[MasterElection] = (),
) -> tuple[MinBrokerIdChange, ...]:
    """5.x ``unRegisterBroker(Set)``: the batch of UNREGISTER_BROKER, expiry and close.

    ``elections`` (raft failover) promote their slaves after the removals and
    before the topic clean-up, so a promoted group is never left masterless;
    their groups are notified by :func:`_election_notes` instead.
    """
    removed: set[str] = set()
    reduced: set[str] = set()
    offline_by_name: dict[str, str] = {}
    # The upstream batch is a set: an identical request twice counts once.
    for request in dict.fromkeys(requests):
        name = request.broker_name
        if _unregister_one(t, request, cs, offline_by_name):
            removed.add(name)
        else:
            reduced.add(name)
    promoted = _promote(t, elections, cs)
    _clean_topics(t, removed, reduced, cs)
    notes: list[MinBrokerIdChange] = list(_election_notes(t, promoted))
    if not config.notify_min_broker_id_changed:
        return tuple(notes)
    elected_names = {e.broker_name for e in promoted}
    for name, offline_addr in sorted(offline_by_name.items()):
        if name in elected_names:
            continue
        group = t.broker_addr.get(name)
        if group is not None and group.enable_acting_master:
            notes.extend(min_broker_id_notification(group, offline_addr, None))
    return tuple(notes)


def _promote(t: Tables, elections: Sequence[MasterElection], cs: ChangeSet) -> list[MasterElection]:
    promoted: list[MasterElection] = []
    for election in elections:
        group = t.broker_addr.get(election.broker_name)
        if group is not None and failover.promote(group, election):
            cs.broker_names.add(group.broker_name)
            cs.master_moves.append(
                MasterMove(
                    election.cluster_name,
                    election.broker_name,
                    election.old_master_addr,
                    election.new_master_addr,
                )
            )
            promoted.append(election)
    return promoted


def _election_notes(t: Tables, promoted: Sequence[MasterElection]) -> tuple[MinBrokerIdChange, ...]:
    """Every member of a promoted group hears of its new master (offline = the old one)."""
    notes: list[MinBrokerIdChange] = []
    for election in promoted:
        notes.extend(
            min_broker_id_notification(
                t.broker_addr[election.broker_name],
                election.old_master_addr,
                election.new_master_ha_addr,
            )
        )
    return tuple(notes)


def _unregister_one(
    t: Tables, request: UnregisterRequest, cs: ChangeSet, offline_by_name: dict[str, str]
) -> bool:
    """Remove one broker; True when its whole broker name went away."""
    key = BrokerAddrInfo(request.cluster_name, request.broker_addr)
    if t.live.pop(key, None) is not None:
        cs.live_brokers.add(key)
    if t.filter_servers.pop(key, None) is not None:
        cs.broker_names.add(request.broker_name)
    group = t.broker_addr.get(request.broker_name)
    if group is None:
        return False
    min_id_changed = bool(group.broker_addrs) and request.broker_id == group.min_broker_id()
    # Removal is by address value; the request's broker id is ignored (5.x).
    gone = [bid for bid, addr in group.broker_addrs.items() if addr == request.broker_addr]
    for bid in gone:
        del group.broker_addrs[bid]
        cs.broker_names.add(group.broker_name)
    if group.broker_addrs:
        if min_id_changed:
            offline_by_name[group.broker_name] = request.broker_addr
        return False
    del t.broker_addr[request.broker_name]
    cs.broker_names.add(request.broker_name)
    members = t.cluster_addr.get(request.cluster_name)
    if members is not None and request.broker_name in members:
        members.discard(request.broker_name)
        cs.clusters.add(request.cluster_name)
        if not members:
            del t.cluster_addr[request.cluster_name]
    return True


def _clean_topics(t: Tables, removed: set[str], reduced: set[str], cs: ChangeSet) -> None:
    """``cleanTopicByUnRegisterRequests``: drop removed brokers' queues, wipe write
    permission of acting groups left without a master. Walks only their topics."""
    for name in sorted(removed):
        for topic in sorted(t.topics_of(name)):
            if t.remove_queue(topic, name):
                cs.topics.add(topic)
    for name in sorted(reduced - removed):
        group = t.broker_addr.get(name)
        if group is None or not group.enable_acting_master or _has_master(group):
            continue
        for topic in sorted(t.topics_of(name)):
            queue = t.topic_queue[topic][name]
            wiped = dataclasses.replace(queue, perm=queue.perm & ~PERM_WRITE)
            if t.put_queue(topic, wiped):
                cs.topics.add(topic)


def _has_master(group: BrokerGroup) -> bool:
    min_id = group.min_broker_id()
    return min_id is not None and min_id <= MASTER_ID


def unregister_request_for(t: Tables, key: BrokerAddrInfo) -> UnregisterRequest | None:
    """``setupUnRegisterRequest``: the broker name and id holding this address in its cluster."""
    for name in sorted(t.broker_addr):
        group = t.broker_addr[name]
        if group.cluster != key.cluster_name:
            continue
        for bid, addr in sorted(group.broker_addrs.items()):
            if addr == key.broker_addr:
                return UnregisterRequest(key.cluster_name, key.broker_addr, name, bid)
    return None


def expire_brokers(
    t: Tables, config: NamesrvConfig, cmd: ExpireBrokers, cs: ChangeSet
) -> tuple[ExpireOutcome, tuple[MinBrokerIdChange, ...]]:
    """The liveness scan, as one replicated decision stamped by the proposer."""
    expired = tuple(
        key
        for key, entry in sorted(t.live.items(), key=lambda item: _key_order(item[0]))
        if entry.last_update_ms + entry.heartbeat_timeout_ms + cmd.skew_allowance_ms < cmd.now_ms
    )
    requests: list[UnregisterRequest] = []
    for key in expired:
        request = unregister_request_for(t, key)
        if request is None:
            # No broker data holds the address: upstream would keep the entry and
            # retry every scan; here the live and filter entries simply go.
            request = UnregisterRequest(key.cluster_name, key.broker_addr, "", MASTER_ID)
        requests.append(request)
    elections = _elections(t, cmd, requests, expired)
    notes = unregister_batch(t, config, requests, cs, elections)
    return ExpireOutcome(expired=expired, elections=elections), notes


def _elections(
    t: Tables,
    cmd: ExpireBrokers,
    requests: Sequence[UnregisterRequest],
    expired: tuple[BrokerAddrInfo, ...],
) -> tuple[MasterElection, ...]:
    """Raft failover: a replacement for every expiring master of an opted-in group."""
    if cmd.failover_lag_bytes_max is None:
        return ()
    gone = frozenset(expired)
    elections: list[MasterElection] = []
    for request in requests:
        group = t.broker_addr.get(request.broker_name)
        if request.broker_id != MASTER_ID or group is None:
            continue
        election = failover.elect_master(t, group, gone, cmd.failover_lag_bytes_max)
        if election is not None:
            elections.append(election)
    return tuple(elections)


def _key_order(key: BrokerAddrInfo) -> tuple[str, str]:
    return (key.cluster_name, key.broker_addr)


def channel_destroyed(
    t: Tables, config: NamesrvConfig, channel: str, cs: ChangeSet
) -> tuple[MinBrokerIdChange, ...]:
    """5.x ``onChannelDestroy(Channel)``: unregister the first live entry on the channel."""
    for key in sorted(t.live, key=_key_order):
        if t.live[key].channel == channel:
            request = unregister_request_for(t, key)
            if request is None:
                return ()
            return unregister_batch(t, config, [request], cs)
    return ()


# ---------------------------------------------------------------- liveness


def touch(
    t: Tables,
    key: BrokerAddrInfo,
    now_ms: int,
    cs: ChangeSet,
    max_offset: int | None = None,
    confirm_offset: int | None = None,
    replication: Replication | None = None,
) -> None:
    """Refresh a live entry; the time only moves forward (clocks of several nodes),
    and so do reported offsets (touches relayed by different nodes may cross). A
    reported ``replication`` replaces the last one (a slave may have disconnected)."""
    entry = t.live.get(key)
    if entry is None:
        return
    updated = dataclasses.replace(
        entry,
        last_update_ms=max(entry.last_update_ms, now_ms),
        max_offset=_forward(entry.max_offset, max_offset),
        confirm_offset=_forward(entry.confirm_offset, confirm_offset),
        replication=entry.replication if replication is None else replication,
    )
    if updated != entry:
        t.live[key] = updated
        cs.live_brokers.add(key)


def _forward(old: int | None, new: int | None) -> int | None:
    if new is None:
        return old
    return new if old is None else max(old, new)


def query_data_version(t: Tables, cmd: QueryDataVersion, cs: ChangeSet) -> QueryDataVersionOutcome:
    """QUERY_DATA_VERSION: changed = no live entry or a different version; 5.x touches always."""
    key = BrokerAddrInfo(cmd.cluster_name, cmd.broker_addr)
    entry = t.live.get(key)
    changed = entry is None or entry.data_version != cmd.data_version
    touch(t, key, cmd.now_ms, cs, cmd.max_offset, cmd.confirm_offset, cmd.replication)
    return QueryDataVersionOutcome(
        changed=changed, data_version=None if entry is None else entry.data_version
    )


# ---------------------------------------------------------------- topics


def operate_write_perm(t: Tables, broker_name: str, wipe: bool, cs: ChangeSet) -> int:
    """WIPE/ADD_WRITE_PERM: every topic of the broker counts, changed or not."""
    topics = sorted(t.topics_of(broker_name))
    for topic in topics:
        queue = t.topic_queue[topic][broker_name]
        perm = queue.perm & ~PERM_WRITE if wipe else PERM_READ | PERM_WRITE
        if t.put_queue(topic, dataclasses.replace(queue, perm=perm)):
            cs.topics.add(topic)
    return len(topics)


def delete_topic(t: Tables, topic: str, cluster_name: str | None, cs: ChangeSet) -> None:
    """DELETE_TOPIC_IN_NAMESRV: the whole topic, or only one cluster's queues."""
    if cluster_name is None or not cluster_name.strip():
        if t.remove_topic(topic):
            cs.topics.add(topic)
        return
    for name in sorted(t.cluster_addr.get(cluster_name, ())):
        if t.remove_queue(topic, name):
            cs.topics.add(topic)


def register_topic(t: Tables, cmd: RegisterTopic, cs: ChangeSet) -> None:
    """REGISTER_TOPIC_IN_NAMESRV: an unknown broker name stops the loop where it is.

    For an existing topic the queues before the bad one stay; a new topic is
    stored only when every broker name is known (upstream builds its map aside).
    """
    if not cmd.queue_datas:
        return
    if cmd.topic not in t.topic_queue:
        if all(q.broker_name in t.broker_addr for q in cmd.queue_datas):
            _put_queues(t, cmd.topic, cmd.queue_datas, cs)
        return
    _put_queues(t, cmd.topic, _until_illegal(t, cmd.queue_datas), cs)


def _until_illegal(t: Tables, queues: Iterable[QueueData]) -> list[QueueData]:
    legal: list[QueueData] = []
    for queue in queues:
        if queue.broker_name not in t.broker_addr:
            break
        legal.append(queue)
    return legal


def _put_queues(t: Tables, topic: str, queues: Iterable[QueueData], cs: ChangeSet) -> None:
    for queue in queues:
        if t.put_queue(topic, queue):
            cs.topics.add(topic)


# ---------------------------------------------------------------- KV config


def kv_entry_bytes(namespace: str, key: str, value: str) -> int:
    """What one KV entry counts against ``kvConfigBytesMax``: its three UTF-8 sizes.

    A lone surrogate (JSON can carry one) counts its 3 encoded bytes instead of
    failing: apply must never raise.
    """
    return sum(len(text.encode("utf-8", "surrogatepass")) for text in (namespace, key, value))


def kv_bytes(t: Tables) -> int:
    """The KV config's total size, as the quota counts it."""
    return sum(
        kv_entry_bytes(namespace, key, value)
        for namespace, table in t.kv.items()
        for key, value in table.items()
    )


def put_kv(
    t: Tables,
    namespace: str,
    key: str,
    value: str,
    cs: ChangeSet,
    *,
    kv_bytes_before: int,
    kv_bytes_max: int,
) -> tuple[int, KvQuotaExceeded | None]:
    """PUT_KV_CONFIG: creates the namespace when needed; the total size after it.

    A put that would grow the total past ``kv_bytes_max`` is refused and changes
    nothing, the namespace included. One that does not grow it (a same-size or
    smaller value) is always taken, even while the total is over the maximum
    (the maximum was lowered, or an old KV file was loaded), so it can shrink.
    """
    table = t.kv.get(namespace)
    previous = None if table is None else table.get(key)
    if previous == value:
        return kv_bytes_before, None
    freed = 0 if previous is None else kv_entry_bytes(namespace, key, previous)
    growth = kv_entry_bytes(namespace, key, value) - freed
    kv_bytes_after = kv_bytes_before + growth
    if growth > 0 and kv_bytes_after > kv_bytes_max:
        return kv_bytes_before, KvQuotaExceeded(kv_bytes_max, kv_bytes_after)
    if table is None:
        t.kv[namespace] = table = {}
    table[key] = value
    cs.kv.add((namespace, key))
    cs.kv_namespaces.add(namespace)
    return kv_bytes_after, None


def delete_kv(t: Tables, namespace: str, key: str, cs: ChangeSet) -> int:
    """DELETE_KV_CONFIG: the namespace stays even when emptied; the bytes freed."""
    table = t.kv.get(namespace)
    if table is None:
        return 0
    previous = table.pop(key, None)
    if previous is None:
        return 0
    cs.kv.add((namespace, key))
    cs.kv_namespaces.add(namespace)
    return kv_entry_bytes(namespace, key, previous)


def update_config(
    config: NamesrvConfig, properties: Sequence[tuple[str, str]]
) -> tuple[NamesrvConfig, str | None]:
    """UPDATE_NAMESRV_CONFIG: refuse on any blacklisted key, else merge known keys.

    A value that does not parse, would make the config invalid or is one this
    NameServer cannot honour, is skipped on its own (Java ``properties2Object``
    ignores such a field the same way; the gateway refuses these before logging).
    """
    blacklisted = config.blacklisted_keys()
    for key, _ in properties:
        if key in blacklisted:
            return config, key
    merged = config
    for key, value in properties:
        try:
            candidate = merged.updated({key: value})
            candidate.validate()
            candidate.check_honoured()
        except ValueError:
            continue
        merged = candidate
    return merged, None
