"""REGISTER_BROKER as two steps: plan the edits, then apply them.

:func:`plan` follows 5.x ``registerBroker`` (plus the two raft-failover rules) on
the tables without changing them and lists every edit it would make;
:func:`apply` makes them. A registration is *liveness only* when its plan holds
no edit but the broker's liveness: raft mode then answers it from the applied
state with the plan's answer and refreshes liveness as a heartbeat does
(:class:`raftstore.liveness.RegistrationDeduper`, :func:`liveness_only`), so
"unchanged" and "applied"
are the same code. Like every rule, both read time only from the command.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TypeVar

from raftstore import failover
from raftstore.commands import RegisterBroker
from raftstore.config import DEFAULT_BROKER_CHANNEL_EXPIRED_TIME_MS, NamesrvConfig
from raftstore.results import (
    BrokerAddrInfo,
    MasterMove,
    MinBrokerIdChange,
    RegisterBrokerOutcome,
)
from raftstore.rules import ChangeSet, min_broker_id_notification
from raftstore.tables import BrokerGroup, BrokerLiveView, RegisteredTopics, Tables
from remoting.model import (
    MASTER_ID,
    NAMESPACE_ORDER_TOPIC_CONFIG,
    PERM_WRITE,
    DataVersion,
    KVTable,
    QueueData,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicQueueMappingInfo,
)

_T = TypeVar("_T")


@dataclass(slots=True)
class RegistrationPlan:
    """Every edit one REGISTER_BROKER makes, in the order :func:`apply` makes them,
    and its answer. ``group`` is the broker group as it will be (None: unchanged);
    ``topics`` the queue writes upstream makes, in its order (None removes the broker's
    queue of that topic; a write of the stored value changes nothing);
    ``live`` the new live entry (None: unchanged); ``filter_servers`` the new list
    (None: unchanged, empty: removed)."""

    command: RegisterBroker
    outcome: RegisterBrokerOutcome
    notes: tuple[MinBrokerIdChange, ...] = ()
    join_cluster: bool = False
    group: BrokerGroup | None = None
    master_move: MasterMove | None = None
    drop_live: bool = False
    topics: list[tuple[str, QueueData | None]] = field(default_factory=list)
    mappings: list[tuple[str, str, TopicQueueMappingInfo]] = field(default_factory=list)
    registered: RegisteredTopics | None = None
    live_before: BrokerLiveView | None = None
    live: BrokerLiveView | None = None
    filter_servers: tuple[str, ...] | None = None


def liveness_only(t: Tables, p: RegistrationPlan) -> bool:
    """Whether applying ``p`` to ``t`` (the tables it was planned on) would change nothing
    but the broker's liveness (last-update time, offsets moving forward) and answer a
    plain acceptance: :func:`changed_parts` finds nothing."""
    return not changed_parts(t, p, first_only=True)


PART_ANSWER = "its role (the answer would not be a plain acceptance)"
PART_GROUP = "its broker group (ids, zone, enableActingMaster, enableRaftFailover)"
PART_CLUSTER = "its cluster membership"
PART_LIVE_ENTRY = "its live entry"
PART_OFFSETS = "its offsets (going backwards)"
PART_FILTER_SERVERS = "its filter servers"
PART_MAPPINGS = "its static-topic mappings"
PART_TOPICS = "its topics (queues, perms)"
_LIVENESS_FIELDS = frozenset(
    {"last_update_ms", "max_offset", "confirm_offset", "replication", "channel"}
)
"""Live-entry fields a touch may change (the channel is not compared: raft mode, the one
that answers from the plan, never acts on it; the gateway names the holder's)."""
_FIELD_NAMES = {
    "ha_server_addr": "haServerAddr",
    "heartbeat_timeout_ms": "heartbeatTimeoutMillis",
    "data_version": "its DataVersion",
}
_COMPARED_FIELDS = tuple(
    (f.name, _FIELD_NAMES.get(f.name, f.name))
    for f in dataclasses.fields(BrokerLiveView)
    if f.name not in _LIVENESS_FIELDS
)


def changed_parts(t: Tables, p: RegistrationPlan, *, first_only: bool = False) -> list[str]:
    """What applying ``p`` to ``t`` would change besides the broker's liveness, named for
    the broker's operator; empty when only liveness would change (the one rule behind
    :func:`liveness_only`, and behind refusing a non-holder's change in the gateway).
    Cheap checks first; ``first_only`` stops at the first part found. The topic writes
    are compared with the stored queues only when nothing else would change."""
    found: list[str] = []

    def note(part: str) -> bool:
        found.append(part)
        return first_only

    outcome = p.outcome
    if (outcome.failed or outcome.needs_full or outcome.assigned_broker_id is not None) and note(
        PART_ANSWER
    ):
        return found
    if (p.notes or p.group is not None) and note(PART_GROUP):
        return found
    if p.join_cluster and note(PART_CLUSTER):
        return found
    before, after = p.live_before, p.live
    if (p.drop_live or before is None) and note(PART_LIVE_ENTRY):
        return found
    if before is not None and after is not None:
        for attr, name in _COMPARED_FIELDS:
            if getattr(before, attr) != getattr(after, attr) and note(name):
                return found
        if not (
            _moves_forward(before.max_offset, after.max_offset)
            and _moves_forward(before.confirm_offset, after.confirm_offset)
        ) and note(PART_OFFSETS):
            return found
    if p.filter_servers is not None and note(PART_FILTER_SERVERS):
        return found
    if p.mappings and note(PART_MAPPINGS):
        return found
    registered = p.registered
    if (
        (registered is not None and t.registered.get(p.command.broker_name) != registered)
        or _writes_change(t, p)
    ) and note(PART_TOPICS):
        return found
    return found


def _writes_change(t: Tables, p: RegistrationPlan) -> bool:
    """Whether the topic writes, made in order, would change a stored queue."""
    name = p.command.broker_name
    written: dict[str, QueueData | None] = {}
    for topic, queue in p.topics:
        stored = written[topic] if topic in written else t.topic_queue.get(topic, {}).get(name)
        if stored != queue:
            return True
        written[topic] = queue
    return False


def _moves_forward(old: int | None, new: int | None) -> bool:
    return new is None or old is None or new >= old


# ---------------------------------------------------------------- plan

_ACCEPTED = RegisterBrokerOutcome()
"""A plain acceptance, the answer a plan starts from (one frozen value, shared)."""


def plan(t: Tables, config: NamesrvConfig, cmd: RegisterBroker) -> RegistrationPlan:
    """The edits of REGISTER_BROKER, 5.x ``registerBroker`` steps in upstream's order,
    plus the two raft-failover rules (:func:`_failover_role`); reads, changes nothing."""
    wrapper = cmd.topic_config_wrapper
    data_version = wrapper.data_version if wrapper is not None else DataVersion()
    superseded = None if wrapper is None else _superseded_plan(t, config, cmd, data_version)
    if superseded is not None:
        return superseded
    if cmd.topics_elided and not elided_topics_hold(t, config, cmd):
        return RegistrationPlan(cmd, RegisterBrokerOutcome(needs_full=True))
    p = RegistrationPlan(cmd, _ACCEPTED)
    p.join_cluster = cmd.broker_name not in t.cluster_addr.get(cmd.cluster_name, ())
    group, register_first = _group_for(t, cmd, p)
    refused, elected = _failover_role(t, group, cmd)
    if refused is not None:
        p.outcome = refused
        return p
    if elected:
        cmd = dataclasses.replace(cmd, broker_id=MASTER_ID)
    prev_min = group.min_broker_id()
    min_id_changed = cmd.broker_id < (prev_min if prev_min is not None else MASTER_ID)
    group = _drop_addr_under_other_ids(group, cmd.broker_addr, cmd.broker_id, p)
    key = BrokerAddrInfo(cmd.cluster_name, cmd.broker_addr)
    if _rejected_by_state_version(t, group, cmd, data_version):
        # The slot belongs to a live broker with a newer state: this one is stale.
        p.drop_live = key in t.live
        return p
    topic_count = len(wrapper.topic_config_table) if wrapper is not None else 0
    if cmd.broker_id not in group.broker_addrs and topic_count == 1:
        # An incremental one-topic registration cannot create a broker.
        p.outcome = RegisterBrokerOutcome(failed=True)
        return p
    old_addr = group.broker_addrs.get(cmd.broker_id)
    if old_addr != cmd.broker_addr:
        group = _editable(group, p)
        group.broker_addrs[cmd.broker_id] = cmd.broker_addr
        if cmd.broker_id == MASTER_ID and old_addr is not None:
            p.master_move = MasterMove(group.cluster, group.broker_name, old_addr, cmd.broker_addr)
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
        _plan_topics(t, config, cmd, group, wrapper, register_first, is_prime_slave, p)
    p.live_before = t.live.get(key)
    live = _live_entry(cmd, p.live_before, data_version)
    p.live = None if live == p.live_before else live
    p.filter_servers = _filter_servers(t, cmd, key)
    p.outcome = RegisterBrokerOutcome(
        *_master_of(t, cmd, group),
        order_topic_config=_order_topic_config(t, config),
        assigned_broker_id=MASTER_ID if elected else None,
    )
    if min_id_changed and config.notify_min_broker_id_changed:
        p.notes = min_broker_id_notification(group, None, cmd.ha_server_addr)
    return p


def superseded_by(held: DataVersion, sent: DataVersion) -> bool:
    """Whether ``held`` is later than ``sent`` in one broker's own history: every
    ``nextVersion`` raises the counter and stamps the broker's clock, so an earlier
    registration has a lower counter and no later timestamp (and no higher
    stateVersion). A broker restarted without its store starts its counter again with
    a later timestamp: not superseded, applied as 5.x does."""
    return (
        held.counter > sent.counter
        and held.timestamp >= sent.timestamp
        and held.state_version >= sent.state_version
    )


def _superseded_plan(
    t: Tables, config: NamesrvConfig, cmd: RegisterBroker, data_version: DataVersion
) -> RegistrationPlan | None:
    """A copy of an earlier registration of a broker the table holds at a later one
    (a registration without a body carries no DataVersion and is never one):
    it refreshes liveness and changes nothing else. 5.x gets a broker's registrations
    in order over its one channel; raft mode logs copies from several members (a
    follower proposes its own when the leader's does not come in time), and such a
    copy can commit after the broker's next registration. Applied as a change, it would
    take the broker's topics back to an earlier table (docs/RAFT.md, "Late copies")."""
    key = BrokerAddrInfo(cmd.cluster_name, cmd.broker_addr)
    held = t.live.get(key)
    group = t.broker_addr.get(cmd.broker_name)
    if (
        held is None
        or group is None
        or group.broker_addrs.get(cmd.broker_id) != cmd.broker_addr
        or cmd.broker_name not in t.cluster_addr.get(cmd.cluster_name, ())
        or not superseded_by(held.data_version, data_version)
    ):
        return None
    p = RegistrationPlan(cmd, _ACCEPTED)
    p.live_before = held
    live = dataclasses.replace(held, last_update_ms=max(held.last_update_ms, cmd.now_ms))
    p.live = None if live == held else live
    p.outcome = RegisterBrokerOutcome(
        *_master_of(t, cmd, group), order_topic_config=_order_topic_config(t, config)
    )
    return p


def elided_topics_hold(t: Tables, config: NamesrvConfig, cmd: RegisterBroker) -> bool:
    """Whether a registration whose topic table is elided (``cmd.topics_elided``) may
    be applied without it: the broker is this group's registered master at this
    address, its last whole table had the same ``topics_digest``, and no queue of the
    broker changed since (any change drops the record, see ``Tables.registered``), under
    the same ``deleteTopicWithBrokerRegistration``. Writing that table again with a
    new DataVersion would then store only values already stored and drop nothing."""
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


def _group_for(t: Tables, cmd: RegisterBroker, p: RegistrationPlan) -> tuple[BrokerGroup, bool]:
    """The BrokerData to plan on (the stored one until an edit copies it, or a new one);
    the last registrant sets zone and acting mode. True when it is new."""
    stored = t.broker_addr.get(cmd.broker_name)
    if stored is None:
        group = p.group = BrokerGroup(cluster=cmd.cluster_name, broker_name=cmd.broker_name)
    else:
        group = stored
    acting = bool(cmd.enable_acting_master)
    raft_failover = bool(cmd.enable_raft_failover)
    if (
        group.enable_acting_master != acting
        or group.zone_name != cmd.zone_name
        or group.raft_failover != raft_failover
    ):
        group = _editable(group, p)
        group.enable_acting_master = acting
        group.zone_name = cmd.zone_name
        group.raft_failover = raft_failover
    return group, stored is None


def _editable(group: BrokerGroup, p: RegistrationPlan) -> BrokerGroup:
    """The plan's own copy of ``group`` to edit: a plan never changes the stored one,
    and copies it only when it edits it (most registrations do not)."""
    if p.group is None:
        p.group = BrokerGroup(
            group.cluster,
            group.broker_name,
            dict(group.broker_addrs),
            group.zone_name,
            group.enable_acting_master,
            group.raft_failover,
        )
    return p.group


def _failover_role(
    t: Tables, group: BrokerGroup, cmd: RegisterBroker
) -> tuple[RegisterBrokerOutcome | None, bool]:
    """Raft failover groups only, before any upstream step changes the group:

    * a broker registering as master while another live broker holds id 0 is a
      returning old master: nothing more is stored, the answer names the current
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


def _drop_addr_under_other_ids(
    group: BrokerGroup, addr: str, broker_id: int, p: RegistrationPlan
) -> BrokerGroup:
    """Slave→master switch: an address appears under one broker id only."""
    stale = [bid for bid, a in group.broker_addrs.items() if a == addr and bid != broker_id]
    if stale:
        group = _editable(group, p)
        for bid in stale:
            del group.broker_addrs[bid]
    return group


def _rejected_by_state_version(
    t: Tables, group: BrokerGroup, cmd: RegisterBroker, data_version: DataVersion
) -> bool:
    old_addr = group.broker_addrs.get(cmd.broker_id)
    if old_addr is None or old_addr == cmd.broker_addr:
        return False
    old_live = t.live.get(BrokerAddrInfo(cmd.cluster_name, old_addr))
    return old_live is not None and old_live.data_version.state_version > data_version.state_version


def _plan_topics(
    t: Tables,
    config: NamesrvConfig,
    cmd: RegisterBroker,
    group: BrokerGroup,
    wrapper: TopicConfigSerializeWrapper,
    register_first: bool,
    is_prime_slave: bool,
    p: RegistrationPlan,
) -> None:
    """Step 10: delete dropped topics (if configured), (re)write changed ones, mappings.
    The writes are upstream's, in its order; apply records those that change a queue."""
    name = group.broker_name
    known = t.topics_of_broker.get(name, set())
    if config.delete_topic_with_broker_registration and not wrapper.topic_queue_mapping_info_map:
        removed = known - wrapper.topic_config_table.keys()
        p.topics.extend((topic, None) for topic in sorted(removed))
        known = known - removed if removed else known
    live = t.live.get(BrokerAddrInfo(cmd.cluster_name, cmd.broker_addr))
    version_changed = live is None or live.data_version != wrapper.data_version
    wipe_write = is_prime_slave and group.enable_acting_master
    rewrite_all = register_first or version_changed
    planned: set[str] = set()
    # One QueueData per distinct queue shape: a broker's thousands of topics mostly
    # share a handful, and a frozen value may be shared (memory, and the apply
    # thread's time: it also sends the heartbeats).
    shapes: dict[tuple[int, int, int, int], QueueData] = {}
    for table_key, topic_config in wrapper.topic_config_table.items():
        topic = topic_config.topic_name or table_key
        if not rewrite_all:
            # With an unchanged DataVersion only topics missing for this broker are
            # (re)created: a plain membership test, no rewrite of the rest.
            if topic in known or topic in planned:
                continue
            planned.add(topic)
        shape = (
            topic_config.read_queue_nums,
            topic_config.write_queue_nums,
            topic_config.perm,
            topic_config.topic_sys_flag,
        )
        queue = shapes.get(shape)
        if queue is None:
            queue = shapes[shape] = _queue_data(name, topic_config, wipe_write)
        p.topics.append((topic, queue))
    if not rewrite_all:
        return
    for topic, info in wrapper.topic_queue_mapping_info_map.items():
        bname = info.bname if info.bname is not None else name
        if t.mapping_infos.get(topic, {}).get(bname) != info:
            p.mappings.append((topic, bname, info))
    if (
        cmd.broker_id == MASTER_ID
        and not wipe_write
        and cmd.topics_digest is not None
        and not wrapper.topic_queue_mapping_info_map
    ):
        # Every queue of the broker is now what this table says (and, with the
        # flag, nothing else): a later registration of the same table may elide it.
        record = RegisteredTopics(
            cmd.cluster_name,
            cmd.broker_addr,
            cmd.topics_digest,
            config.delete_topic_with_broker_registration,
        )
        p.registered = record


def _queue_data(broker_name: str, tc: TopicConfig, wipe_write: bool) -> QueueData:
    perm = tc.perm & ~PERM_WRITE if wipe_write else tc.perm
    return QueueData(
        broker_name=broker_name,
        read_queue_nums=tc.read_queue_nums,
        write_queue_nums=tc.write_queue_nums,
        perm=perm,
        topic_sys_flag=tc.topic_sys_flag,
    )


def _live_entry(
    cmd: RegisterBroker, previous: BrokerLiveView | None, dv: DataVersion
) -> BrokerLiveView:
    last = cmd.now_ms if previous is None else max(previous.last_update_ms, cmd.now_ms)
    timeout = cmd.heartbeat_timeout_ms
    return BrokerLiveView(
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
        replication=_reported(cmd.replication, previous.replication if previous else None),
    )


def _reported(new: _T | None, old: _T | None) -> _T | None:
    return old if new is None else new


def _filter_servers(t: Tables, cmd: RegisterBroker, key: BrokerAddrInfo) -> tuple[str, ...] | None:
    """None leaves the filter list alone; empty removes it; otherwise it is stored."""
    if cmd.filter_server_list is None:
        return None
    servers = tuple(cmd.filter_server_list)
    if not servers:
        return () if key in t.filter_servers else None
    return None if t.filter_servers.get(key) == servers else servers


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


# ---------------------------------------------------------------- apply


def apply(
    t: Tables, p: RegistrationPlan, cs: ChangeSet
) -> tuple[RegisterBrokerOutcome, tuple[MinBrokerIdChange, ...]]:
    """Make the plan's edits and record them in ``cs``; its answer and notifications."""
    cmd = p.command
    name = cmd.broker_name
    key = BrokerAddrInfo(cmd.cluster_name, cmd.broker_addr)
    if p.join_cluster:
        t.cluster_addr.setdefault(cmd.cluster_name, set()).add(name)
        cs.clusters.add(cmd.cluster_name)
    if p.group is not None:
        t.broker_addr[name] = p.group
        cs.broker_names.add(name)
    if p.master_move is not None:
        cs.master_moves.append(p.master_move)
    if p.drop_live:
        del t.live[key]
        cs.live_brokers.add(key)
    for topic, queue in p.topics:
        if t.remove_queue(topic, name) if queue is None else t.put_queue(topic, queue):
            cs.topics.add(topic)
    for topic, bname, info in p.mappings:
        t.mapping_infos.setdefault(topic, {})[bname] = info
        cs.topics.add(topic)
    if p.registered is not None:
        t.registered[name] = p.registered
    if p.live is not None:
        t.live[key] = p.live
        cs.live_brokers.add(key)
    if p.filter_servers is not None:
        if p.filter_servers:
            t.filter_servers[key] = p.filter_servers
        else:
            del t.filter_servers[key]
        # The route answers (by broker name) and the filter row (by key) both move.
        cs.broker_names.add(name)
        cs.live_brokers.add(key)
    return p.outcome, p.notes
