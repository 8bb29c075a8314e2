"""The write rules of RocketMQ 5.x ``RouteInfoManager`` and ``KVConfigManager``.

Each function mutates :class:`~raftstore.tables.Tables` for one command and
records what it really changed in a :class:`ChangeSet`; a rule that ends where
it started records nothing, so the applied version stays put. Time comes only
from the command (``now_ms``); iteration that could decide an outcome runs in
sorted order, so the same commands give the same state on every node.

Why one module of ~730 lines: these rules are one state machine. They read and
write the same tables in ways that must be checked together (a registration
touches topics, groups, liveness and filter servers); a reader comparing them with
upstream's ``RouteInfoManager`` finds them in the same order in one file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from raftstore import failover
from raftstore.commands import (
    ExpireBrokers,
    QueryDataVersion,
    RegisterBroker,
    RegisterTopic,
    UnregisterRequest,
)
from raftstore.config import DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS, NamesrvConfig
from raftstore.results import (
    BrokerAddrInfo,
    Changes,
    ExpireOutcome,
    KvQuotaExceeded,
    MasterElection,
    MasterMove,
    MinBrokerIdChange,
    QueryDataVersionOutcome,
    RegisterBrokerOutcome,
)
from raftstore.tables import BrokerGroup, BrokerLiveView, RegisteredTopics, Tables
from remoting.model import (
    MASTER_ID,
    NAMESPACE_ORDER_TOPIC_CONFIG,
    PERM_READ,
    PERM_WRITE,
    DataVersion,
    KVTable,
    QueueData,
    TopicConfig,
    TopicConfigSerializeWrapper,
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


# ---------------------------------------------------------------- registration


def register_broker(
    t: Tables, config: NamesrvConfig, cmd: RegisterBroker, cs: ChangeSet
) -> tuple[RegisterBrokerOutcome, tuple[MinBrokerIdChange, ...]]:
    """REGISTER_BROKER, 5.x ``registerBroker`` steps in upstream's order,
    plus the two raft-failover rules (:func:`_failover_role`)."""
    key = BrokerAddrInfo(cmd.cluster_name, cmd.broker_addr)
    if cmd.topics_elided and not elided_topics_hold(t, config, cmd):
        return RegisterBrokerOutcome(needs_full=True), ()
    wrapper = cmd.topic_config_wrapper
    data_version = wrapper.data_version if wrapper is not None else DataVersion()
    _join_cluster(t, cmd.cluster_name, cmd.broker_name, cs)
    group, register_first = _group_for(t, cmd, cs)
    refused, elected = _failover_role(t, group, cmd)
    if refused is not None:
        return refused, ()
    if elected:
        cmd = dataclasses.replace(cmd, broker_id=MASTER_ID)
    prev_min = group.min_broker_id()
    min_id_changed = cmd.broker_id < (prev_min if prev_min is not None else MASTER_ID)
    _drop_addr_under_other_ids(group, cmd.broker_addr, cmd.broker_id, cs)
    if _rejected_by_state_version(t, group, cmd, data_version):
        # The slot belongs to a live broker with a newer state: this one is stale.
        if t.live.pop(key, None) is not None:
            cs.live_brokers.add(key)
        return RegisterBrokerOutcome(), ()
    topic_count = len(wrapper.topic_config_table) if wrapper is not None else 0
    if cmd.broker_id not in group.broker_addrs and topic_count == 1:
        # An incremental one-topic registration cannot create a broker.
        return RegisterBrokerOutcome(failed=True), ()
    old_addr = group.broker_addrs.get(cmd.broker_id)
    if old_addr != cmd.broker_addr:
        group.broker_addrs[cmd.broker_id] = cmd.broker_addr
        cs.broker_names.add(group.broker_name)
        if cmd.broker_id == MASTER_ID and old_addr is not None:
            cs.master_moves.append(
                MasterMove(group.cluster, group.broker_name, old_addr, cmd.broker_addr)
            )
    register_first = register_first or not old_addr
    is_master = cmd.broker_id == MASTER_ID
    is_prime_slave = (
        cmd.enable_acting_master is not None
        and not is_master
        and cmd.broker_id == group.min_broker_id()
    )
    # An elided table is the recorded one (elided_topics_hold): writing it again would
    # change nothing, and the wrapper holds only the DataVersion.
    if not cmd.topics_elided and wrapper is not None and (is_master or is_prime_slave):
        _write_topics(t, config, cmd, group, wrapper, register_first, is_prime_slave, cs)
    _store_live(t, cmd, key, data_version, cs)
    _store_filter_servers(t, cmd, key, group.broker_name, cs)
    outcome = RegisterBrokerOutcome(
        *_master_of(t, cmd, group),
        order_topic_config=_order_topic_config(t, config),
        assigned_broker_id=MASTER_ID if elected else None,
    )
    notes: tuple[MinBrokerIdChange, ...] = ()
    if min_id_changed and config.notify_min_broker_id_changed:
        notes = _notification(group, None, cmd.ha_server_addr)
    return outcome, notes


def elided_topics_hold(t: Tables, config: NamesrvConfig, cmd: RegisterBroker) -> bool:
    """Whether a registration whose topic table is elided (``cmd.topics_elided``) may
    be applied without it: the broker is this group's registered master at this
    address, its last whole table had the same ``topics_digest``, and no queue of the
    broker changed since (any change drops the record, see ``Tables.registered``), under
    the same ``deleteTopicWithBrokerRegistration``. Writing that table again with a
    new DataVersion (``_write_topics`` with ``rewrite_all``) would then store only
    values already stored and drop nothing, so leaving it out gives the same state."""
    if cmd.broker_id != MASTER_ID or cmd.topics_digest is None:
        return False
    record = t.registered.get(cmd.broker_name)
    group = t.broker_addr.get(cmd.broker_name)
    return (
        record is not None
        and group is not None
        and group.broker_addrs.get(MASTER_ID) == cmd.broker_addr
        and record.cluster_name == cmd.cluster_name
        and record.broker_addr == cmd.broker_addr
        and record.topics_digest == cmd.topics_digest
        and record.delete_dropped == config.delete_topic_with_broker_registration
    )


def unchanged_registration(
    t: Tables, config: NamesrvConfig, cmd: RegisterBroker
) -> RegisterBrokerOutcome | None:
    """The answer of ``cmd`` when applying it would change nothing but the broker's
    liveness (last-update time, offsets moving forward); None when it would
    change anything else, or when that cannot be told cheaply.

    Raft mode answers such a registration from the applied state and refreshes
    liveness as a heartbeat does (see :class:`raftstore.liveness.TouchCoalescer`),
    instead of appending the whole topic table to the log again. Every check
    mirrors a step of :func:`register_broker` that would otherwise record a change.
    The channel is not compared: raft mode never acts on it.
    """
    wrapper = cmd.topic_config_wrapper
    group = t.broker_addr.get(cmd.broker_name)
    live = t.live.get(BrokerAddrInfo(cmd.cluster_name, cmd.broker_addr))
    if wrapper is None or group is None or live is None:
        return None
    timeout = cmd.heartbeat_timeout_ms
    if (
        live.data_version != wrapper.data_version
        or live.ha_server_addr != cmd.ha_server_addr
        or live.heartbeat_timeout_ms
        != (timeout if timeout is not None else DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS)
        or not _moves_forward(live.max_offset, cmd.max_offset)
        or not _moves_forward(live.confirm_offset, cmd.confirm_offset)
        or group.cluster != cmd.cluster_name
        or cmd.broker_name not in t.cluster_addr.get(cmd.cluster_name, ())
        or group.enable_acting_master != bool(cmd.enable_acting_master)
        or group.zone_name != cmd.zone_name
        or group.raft_failover != bool(cmd.enable_raft_failover)
        or group.broker_addrs.get(cmd.broker_id) != cmd.broker_addr
        or sum(1 for addr in group.broker_addrs.values() if addr == cmd.broker_addr) != 1
    ):
        return None
    if cmd.broker_id == MASTER_ID and failover.live_master_holder(t, group, cmd.broker_addr):
        return None
    servers = cmd.filter_server_list
    if servers is not None and t.filter_servers.get(
        BrokerAddrInfo(cmd.cluster_name, cmd.broker_addr), ()
    ) != tuple(servers):
        return None
    is_prime_slave = (
        cmd.enable_acting_master is not None
        and cmd.broker_id != MASTER_ID
        and cmd.broker_id == group.min_broker_id()
    )
    if cmd.topics_elided:
        if not elided_topics_hold(t, config, cmd):
            return None
    elif cmd.broker_id == MASTER_ID or is_prime_slave:
        known = t.topics_of_broker.get(cmd.broker_name, set())
        table = wrapper.topic_config_table
        if any((tc.topic_name or key) not in known for key, tc in table.items()):
            return None
        if (
            config.delete_topic_with_broker_registration
            and not wrapper.topic_queue_mapping_info_map
            and not known <= table.keys()
        ):
            return None
    return RegisterBrokerOutcome(
        *_master_of(t, cmd, group), order_topic_config=_order_topic_config(t, config)
    )


def _moves_forward(old: int | None, new: int | None) -> bool:
    """A touch keeps the larger offset, a registration the reported one: they agree
    unless the report goes backwards."""
    return new is None or old is None or new >= old


def _failover_role(
    t: Tables, group: BrokerGroup, cmd: RegisterBroker
) -> tuple[RegisterBrokerOutcome | None, bool]:
    """Raft failover groups only, before any upstream step changes the group:

    * a broker registering as master while another live broker holds id 0 is a
      returning old master: nothing is stored, the answer names the current
      master and assigns it a slave id;
    * a broker registering as a slave whose address holds id 0 was elected
      while it had not yet heard of it: it registers as the master and is told
      to take id 0 (so a lost notification heals at its next registration).

    Returns the refusal answer (or None) and whether the registrant was elected.
    """
    if not group.raft_failover:
        return None, False
    if cmd.broker_id == MASTER_ID:
        holder = failover.live_master_holder(t, group, cmd.broker_addr)
        if holder is None:
            return None, False
        refusal = RegisterBrokerOutcome(
            master_addr=holder.broker_addr,
            ha_server_addr=holder.ha_server_addr,
            assigned_broker_id=failover.slave_id_for(group, cmd.broker_addr),
        )
        return refusal, False
    return None, group.broker_addrs.get(MASTER_ID) == cmd.broker_addr


def _join_cluster(t: Tables, cluster: str, broker_name: str, cs: ChangeSet) -> None:
    members = t.cluster_addr.setdefault(cluster, set())
    if broker_name not in members:
        members.add(broker_name)
        cs.clusters.add(cluster)


def _group_for(t: Tables, cmd: RegisterBroker, cs: ChangeSet) -> tuple[BrokerGroup, bool]:
    """Get or create the BrokerData; the last registrant sets zone and acting mode."""
    group = t.broker_addr.get(cmd.broker_name)
    created = group is None
    if group is None:
        group = BrokerGroup(cluster=cmd.cluster_name, broker_name=cmd.broker_name)
        t.broker_addr[cmd.broker_name] = group
        cs.broker_names.add(cmd.broker_name)
    acting = bool(cmd.enable_acting_master)
    raft_failover = bool(cmd.enable_raft_failover)
    if (
        group.enable_acting_master != acting
        or group.zone_name != cmd.zone_name
        or group.raft_failover != raft_failover
    ):
        group.enable_acting_master = acting
        group.zone_name = cmd.zone_name
        group.raft_failover = raft_failover
        cs.broker_names.add(cmd.broker_name)
    return group, created


def _drop_addr_under_other_ids(
    group: BrokerGroup, addr: str, broker_id: int, cs: ChangeSet
) -> None:
    """Slave→master switch: an address appears under one broker id only."""
    stale = [bid for bid, a in group.broker_addrs.items() if a == addr and bid != broker_id]
    for bid in stale:
        del group.broker_addrs[bid]
        cs.broker_names.add(group.broker_name)


def _rejected_by_state_version(
    t: Tables, group: BrokerGroup, cmd: RegisterBroker, data_version: DataVersion
) -> bool:
    old_addr = group.broker_addrs.get(cmd.broker_id)
    if old_addr is None or old_addr == cmd.broker_addr:
        return False
    old_live = t.live.get(BrokerAddrInfo(cmd.cluster_name, old_addr))
    return old_live is not None and old_live.data_version.state_version > data_version.state_version


def _write_topics(
    t: Tables,
    config: NamesrvConfig,
    cmd: RegisterBroker,
    group: BrokerGroup,
    wrapper: TopicConfigSerializeWrapper,
    register_first: bool,
    is_prime_slave: bool,
    cs: ChangeSet,
) -> None:
    """Step 10: delete dropped topics (if configured), (re)write changed ones, mappings."""
    name = group.broker_name
    if config.delete_topic_with_broker_registration and not wrapper.topic_queue_mapping_info_map:
        dropped = t.topics_of(name) - wrapper.topic_config_table.keys()
        for topic in sorted(dropped):
            if t.remove_queue(topic, name):
                cs.topics.add(topic)
    live = t.live.get(BrokerAddrInfo(cmd.cluster_name, cmd.broker_addr))
    version_changed = live is None or live.data_version != wrapper.data_version
    wipe_write = is_prime_slave and group.enable_acting_master
    rewrite_all = register_first or version_changed
    known = t.topics_of_broker.get(name, set())
    # One QueueData per distinct queue shape: a broker's thousands of topics mostly
    # share a handful, and a frozen value may be shared (memory, and the apply
    # thread's time: it also sends the heartbeats).
    shapes: dict[tuple[int, int, int, int], QueueData] = {}
    for table_key, topic_config in wrapper.topic_config_table.items():
        topic = topic_config.topic_name or table_key
        # With an unchanged DataVersion only topics missing for this broker are
        # (re)created: a plain membership test, no rewrite of the rest.
        if rewrite_all or topic not in known:
            shape = (
                topic_config.read_queue_nums,
                topic_config.write_queue_nums,
                topic_config.perm,
                topic_config.topic_sys_flag,
            )
            queue = shapes.get(shape)
            if queue is None:
                queue = shapes[shape] = _queue_data(name, topic_config, wipe_write)
            if t.put_queue(topic, queue):
                cs.topics.add(topic)
            known = t.topics_of_broker.get(name, set())
    if rewrite_all:
        for topic, info in wrapper.topic_queue_mapping_info_map.items():
            bname = info.bname if info.bname is not None else name
            infos = t.mapping_infos.setdefault(topic, {})
            if infos.get(bname) != info:
                infos[bname] = info
                cs.topics.add(topic)
    if (
        rewrite_all
        and cmd.broker_id == MASTER_ID
        and not wipe_write
        and cmd.topics_digest is not None
        and not wrapper.topic_queue_mapping_info_map
    ):
        # Every queue of the broker is now what this table says (and, with the
        # flag, nothing else): a later registration of the same table may elide it.
        t.registered[name] = RegisteredTopics(
            cmd.cluster_name,
            cmd.broker_addr,
            cmd.topics_digest,
            config.delete_topic_with_broker_registration,
        )


def _queue_data(broker_name: str, tc: TopicConfig, wipe_write: bool) -> QueueData:
    perm = tc.perm & ~PERM_WRITE if wipe_write else tc.perm
    return QueueData(
        broker_name=broker_name,
        read_queue_nums=tc.read_queue_nums,
        write_queue_nums=tc.write_queue_nums,
        perm=perm,
        topic_sys_flag=tc.topic_sys_flag,
    )


def _store_live(
    t: Tables, cmd: RegisterBroker, key: BrokerAddrInfo, dv: DataVersion, cs: ChangeSet
) -> None:
    previous = t.live.get(key)
    last = cmd.now_ms if previous is None else max(previous.last_update_ms, cmd.now_ms)
    timeout = cmd.heartbeat_timeout_ms
    entry = BrokerLiveView(
        cluster_name=cmd.cluster_name,
        broker_addr=cmd.broker_addr,
        last_update_ms=last,
        heartbeat_timeout_ms=timeout
        if timeout is not None
        else DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS,
        data_version=dv,
        ha_server_addr=cmd.ha_server_addr,
        channel=cmd.channel,
        # A registration without offsets keeps the last reported ones.
        max_offset=_reported(cmd.max_offset, previous.max_offset if previous else None),
        confirm_offset=_reported(cmd.confirm_offset, previous.confirm_offset if previous else None),
    )
    if entry != previous:
        t.live[key] = entry
        cs.live_brokers.add(key)


def _reported(new: int | None, old: int | None) -> int | None:
    return old if new is None else new


def _store_filter_servers(
    t: Tables, cmd: RegisterBroker, key: BrokerAddrInfo, broker_name: str, cs: ChangeSet
) -> None:
    """None leaves the filter list alone; empty removes it; otherwise it is stored."""
    if cmd.filter_server_list is None:
        return
    if not cmd.filter_server_list:
        if t.filter_servers.pop(key, None) is not None:
            cs.broker_names.add(broker_name)
            cs.live_brokers.add(key)
        return
    servers = tuple(cmd.filter_server_list)
    if t.filter_servers.get(key) != servers:
        t.filter_servers[key] = servers
        # The route answers (by broker name) and the filter row (by key) both move.
        cs.broker_names.add(broker_name)
        cs.live_brokers.add(key)


def _master_of(t: Tables, cmd: RegisterBroker, group: BrokerGroup) -> tuple[str | None, str | None]:
    """Step 13: a slave learns its master's address and HA address, if the master is live."""
    if cmd.broker_id == MASTER_ID:
        return None, None
    master_addr = group.broker_addrs.get(MASTER_ID)
    if master_addr is None:
        return None, None
    master_live = t.live.get(BrokerAddrInfo(cmd.cluster_name, master_addr))
    if master_live is None:
        return None, None
    return master_addr, master_live.ha_server_addr


def _order_topic_config(t: Tables, config: NamesrvConfig) -> KVTable | None:
    if not config.return_order_topic_config_to_broker:
        return None
    namespace = t.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG)
    return None if namespace is None else KVTable(table=dict(sorted(namespace.items())))


def _notification(
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
            notes.extend(_notification(group, offline_addr, None))
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
            _notification(
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
) -> None:
    """Refresh a live entry; the time only moves forward (clocks of several nodes),
    and so do reported offsets (touches relayed by different nodes may cross)."""
    entry = t.live.get(key)
    if entry is None:
        return
    updated = dataclasses.replace(
        entry,
        last_update_ms=max(entry.last_update_ms, now_ms),
        max_offset=_forward(entry.max_offset, max_offset),
        confirm_offset=_forward(entry.confirm_offset, confirm_offset),
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
    touch(t, key, cmd.now_ms, cs, cmd.max_offset, cmd.confirm_offset)
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

    A value that does not parse, or would make the config invalid, is skipped on
    its own (Java ``properties2Object`` ignores such a field the same way).
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
        except ValueError:
            continue
        merged = candidate
    return merged, None
