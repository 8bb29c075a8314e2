"""The pure, deterministic route table: every RocketMQ 5.x RouteInfoManager rule.

``RouteTable.apply(command)`` is the only way to change it. Apply never reads a
clock, a random source or the environment: time arrives in the command. The
same command sequence therefore gives the same state, versions and digest on
every node, and a snapshot restored elsewhere continues identically.

Queries return fresh frozen values and sort whatever upstream leaves in hash
order, so answers depend on the state only, never on the order it was built in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from raftstore import registration, rules, snapshot
from raftstore.commands import (
    AddWritePerm,
    Barrier,
    BrokerHeartbeat,
    ChannelDestroyed,
    Command,
    DeleteKV,
    DeleteTopic,
    ExpireBrokers,
    PutKV,
    QueryDataVersion,
    RegisterBroker,
    RegisterTopic,
    UnregisterBrokers,
    UpdateNamesrvConfig,
    WipeWritePerm,
)
from raftstore.config import NamesrvConfig
from raftstore.results import (
    ApplyResult,
    BrokerAddrInfo,
    ConfigOutcome,
    MinBrokerIdChange,
    Outcome,
    PermOutcome,
    RegisterBrokerOutcome,
)
from raftstore.snapshot import StateDigests
from raftstore.tables import BrokerGroup, BrokerLiveView, Tables
from remoting.model import (
    MASTER_ID,
    NAMESPACE_ORDER_TOPIC_CONFIG,
    SYNC_BROKER_MEMBER_GROUP_PREFIX,
    TOPIC_SYS_FLAG_UNIT,
    TOPIC_SYS_FLAG_UNIT_SUB,
    BrokerData,
    BrokerMemberGroup,
    ClusterInfo,
    DataVersion,
    KVTable,
    QueueData,
    TopicList,
    TopicQueueMappingInfo,
    TopicRouteData,
    is_writeable,
)

__all__ = ["BrokerLiveView", "RouteTable"]

_Handled = tuple[Outcome, tuple[MinBrokerIdChange, ...]]


class RouteTable:
    """RocketMQ 5.x ``RouteInfoManager`` + ``KVConfigManager`` + the replicated config.

    ``applied_version`` counts the applied commands that changed state;
    ``routes_version`` counts those that may change a route or cluster answer
    (liveness touches do not), so a route cache keyed by it survives heartbeats.
    """

    def __init__(self, config: NamesrvConfig | None = None) -> None:
        """An empty table; ``config`` defaults to the 5.x defaults."""
        self.config: NamesrvConfig = config if config is not None else NamesrvConfig()
        self.applied_version: int = 0
        self.routes_version: int = 0
        self._t = Tables()
        # The KV config's size as the quota counts it; None: count it on the
        # next put (a fresh or restored table), then keep it up to date.
        self._kv_bytes: int | None = None

    def queue_row_count(self) -> int:
        """Queue entries (one per topic and broker): what a digest's cost grows with."""
        return sum(len(queues) for queues in self._t.topic_queue.values())

    # ------------------------------------------------------------ apply

    def apply(self, command: Command) -> ApplyResult:
        """Apply one command and report its answer and every key it changed."""
        handler = _HANDLERS.get(type(command))
        if handler is None:
            raise TypeError(f"not a route table command: {type(command).__name__}")
        cs = rules.ChangeSet()
        outcome, notifications = handler(self, command, cs)
        changes = cs.freeze()
        if not changes.empty:
            self.applied_version += 1
            if changes.affects_routes:
                self.routes_version += 1
        return ApplyResult(self.applied_version, changes, outcome, notifications)

    def liveness_only_answer(self, cmd: RegisterBroker) -> RegisterBrokerOutcome | None:
        """The answer of ``cmd`` when its plan holds only liveness edits
        (:func:`raftstore.registration.liveness_only`), else None; reads, changes nothing."""
        plan = registration.plan(self._t, self.config, cmd)
        return plan.outcome if registration.liveness_only(self._t, plan) else None

    def registration_changes(self, cmd: RegisterBroker) -> list[str]:
        """What ``cmd`` would change besides the broker's liveness, named
        (:func:`raftstore.registration.changed_parts`); reads, changes nothing."""
        return registration.changed_parts(self._t, registration.plan(self._t, self.config, cmd))

    def _register_broker(self, cmd: RegisterBroker, cs: rules.ChangeSet) -> _Handled:
        return registration.apply(self._t, registration.plan(self._t, self.config, cmd), cs)

    def _unregister(self, cmd: UnregisterBrokers, cs: rules.ChangeSet) -> _Handled:
        return None, rules.unregister_batch(self._t, self.config, cmd.requests, cs)

    def _heartbeat(self, cmd: BrokerHeartbeat, cs: rules.ChangeSet) -> _Handled:
        key = BrokerAddrInfo(cmd.cluster_name, cmd.broker_addr)
        rules.touch(
            self._t, key, cmd.now_ms, cs, cmd.max_offset, cmd.confirm_offset, cmd.replication
        )
        return None, ()

    def _query_data_version(self, cmd: QueryDataVersion, cs: rules.ChangeSet) -> _Handled:
        return rules.query_data_version(self._t, cmd, cs), ()

    def _expire(self, cmd: ExpireBrokers, cs: rules.ChangeSet) -> _Handled:
        return rules.expire_brokers(self._t, self.config, cmd, cs)

    def _channel_destroyed(self, cmd: ChannelDestroyed, cs: rules.ChangeSet) -> _Handled:
        return None, rules.channel_destroyed(self._t, self.config, cmd.channel, cs)

    def _put_kv(self, cmd: PutKV, cs: rules.ChangeSet) -> _Handled:
        self._kv_bytes, refused = rules.put_kv(
            self._t,
            cmd.namespace,
            cmd.key,
            cmd.value,
            cs,
            kv_bytes_before=self.kv_bytes(),
            kv_bytes_max=self.config.kv_config_bytes_max,
        )
        return refused, ()

    def _delete_kv(self, cmd: DeleteKV, cs: rules.ChangeSet) -> _Handled:
        freed = rules.delete_kv(self._t, cmd.namespace, cmd.key, cs)
        if freed and self._kv_bytes is not None:
            self._kv_bytes -= freed
        return None, ()

    def _wipe_perm(self, cmd: WipeWritePerm, cs: rules.ChangeSet) -> _Handled:
        return PermOutcome(rules.operate_write_perm(self._t, cmd.broker_name, True, cs)), ()

    def _add_perm(self, cmd: AddWritePerm, cs: rules.ChangeSet) -> _Handled:
        return PermOutcome(rules.operate_write_perm(self._t, cmd.broker_name, False, cs)), ()

    def _delete_topic(self, cmd: DeleteTopic, cs: rules.ChangeSet) -> _Handled:
        rules.delete_topic(self._t, cmd.topic, cmd.cluster_name, cs)
        return None, ()

    def _register_topic(self, cmd: RegisterTopic, cs: rules.ChangeSet) -> _Handled:
        rules.register_topic(self._t, cmd, cs)
        return None, ()

    def _update_config(self, cmd: UpdateNamesrvConfig, cs: rules.ChangeSet) -> _Handled:
        merged, rejected = rules.update_config(self.config, cmd.properties)
        if merged != self.config:
            self.config = merged
            cs.config = True
        return ConfigOutcome(rejected_key=rejected), ()

    def _barrier(self, cmd: Barrier, cs: rules.ChangeSet) -> _Handled:
        return None, ()

    # ------------------------------------------------------------ route queries

    def pickup_topic_route(self, topic: str) -> TopicRouteData | None:
        """GET_ROUTEINFO_BY_TOPIC: None when the topic has no queue or no known broker."""
        queues = self._t.topic_queue.get(topic)
        if not queues:
            return None
        queue_datas = [queues[name] for name in sorted(queues)]
        groups = [self._t.broker_addr[n] for n in sorted(queues) if n in self._t.broker_addr]
        if not groups:
            return None
        broker_datas = [g.to_data() for g in groups]
        if self.config.support_acting_master and not topic.startswith(
            SYNC_BROKER_MEMBER_GROUP_PREFIX
        ):
            broker_datas = _with_acting_masters(broker_datas, queue_datas)
        mapping = self._t.mapping_infos.get(topic)
        return TopicRouteData(
            queue_datas=queue_datas,
            broker_datas=broker_datas,
            filter_server_table=self._filter_table(groups),
            order_topic_conf=self._order_topic_conf(topic),
            topic_queue_mapping_by_broker=dict(sorted(mapping.items())) if mapping else None,
        )

    def _filter_table(self, groups: list[BrokerGroup]) -> dict[str, list[str]]:
        # Upstream also stores null lists for addresses without filter servers;
        # fastjson drops null map values, so only real lists are kept here.
        table: dict[str, list[str]] = {}
        if not self._t.filter_servers:
            return table
        for group in groups:
            for _, addr in sorted(group.broker_addrs.items()):
                servers = self._t.filter_servers.get(BrokerAddrInfo(group.cluster, addr))
                if servers is not None:
                    table[addr] = list(servers)
        return table

    def _order_topic_conf(self, topic: str) -> str | None:
        if not self.config.order_message_enable:
            return None
        return self.kv_get(NAMESPACE_ORDER_TOPIC_CONFIG, topic)

    def cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO: every broker group and every cluster's broker names."""
        return ClusterInfo(
            broker_addr_table={
                n: self._t.broker_addr[n].to_data() for n in sorted(self._t.broker_addr)
            },
            cluster_addr_table={
                c: sorted(self._t.cluster_addr[c]) for c in sorted(self._t.cluster_addr)
            },
        )

    def broker_member_group(self, cluster: str, broker_name: str) -> BrokerMemberGroup:
        """GET_BROKER_MEMBER_GROUP: a copy of the group's addresses (the cluster is a label)."""
        group = self._t.broker_addr.get(broker_name)
        addrs = {} if group is None else dict(sorted(group.broker_addrs.items()))
        return BrokerMemberGroup(cluster=cluster, broker_name=broker_name, broker_addrs=addrs)

    def broker_datas(self) -> dict[str, BrokerData]:
        """Every broker group by name (copies)."""
        return self.cluster_info().broker_addr_table

    def topic_queue_table(self) -> dict[str, dict[str, QueueData]]:
        """Every topic's QueueData by broker name (copies, sorted)."""
        return {topic: self.topic_queues(topic) for topic in sorted(self._t.topic_queue)}

    def topic_queues(self, topic: str) -> dict[str, QueueData]:
        """One topic's QueueData by broker name (a sorted copy; empty when none)."""
        queues = self._t.topic_queue.get(topic)
        return dict(sorted(queues.items())) if queues else {}

    def topic_queue_mapping(self, topic: str) -> dict[str, TopicQueueMappingInfo]:
        """One topic's static-topic mapping infos by broker name (empty when none)."""
        infos = self._t.mapping_infos.get(topic)
        return dict(sorted(infos.items())) if infos else {}

    def broker_topics(self, broker_name: str) -> frozenset[str]:
        """The topics holding a queue of ``broker_name`` (their routes name its group)."""
        return frozenset(self._t.topics_of(broker_name))

    def broker_data(self, broker_name: str) -> BrokerData | None:
        """One broker group (a copy), None when unknown."""
        group = self._t.broker_addr.get(broker_name)
        return None if group is None else group.to_data()

    def cluster_members(self, cluster: str) -> list[str] | None:
        """One cluster's broker names, sorted; None when the cluster is unknown."""
        members = self._t.cluster_addr.get(cluster)
        return None if members is None else sorted(members)

    def broker_filter_servers(self, cluster: str, addr: str) -> tuple[str, ...] | None:
        """One live broker's filter servers, None when it has none registered."""
        return self._t.filter_servers.get(BrokerAddrInfo(cluster, addr))

    def filter_servers(self) -> dict[BrokerAddrInfo, tuple[str, ...]]:
        """The filter-server table by live key."""
        return {k: self._t.filter_servers[k] for k in sorted(self._t.filter_servers, key=_order)}

    def topic_queue_mapping_infos(self) -> dict[str, dict[str, TopicQueueMappingInfo]]:
        """Static-topic mapping infos by topic, then broker name."""
        return {
            topic: dict(sorted(self._t.mapping_infos[topic].items()))
            for topic in sorted(self._t.mapping_infos)
        }

    # ------------------------------------------------------------ topic lists

    def all_topic_list(self) -> TopicList:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER."""
        return TopicList(topic_list=sorted(self._t.topic_queue))

    def topics_by_cluster(self, cluster: str) -> TopicList:
        """GET_TOPICS_BY_CLUSTER: topics with a queue on any broker of the cluster."""
        topics: set[str] = set()
        for name in self._t.cluster_addr.get(cluster, ()):
            topics |= self._t.topics_of_broker.get(name, set())
        return TopicList(topic_list=sorted(topics))

    def system_topic_list(self) -> TopicList:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS: cluster and broker names, plus one broker address."""
        names: set[str] = set()
        for cluster, members in self._t.cluster_addr.items():
            names.add(cluster)
            names |= members
        broker_addr = None
        for name in sorted(self._t.broker_addr):
            addrs = self._t.broker_addr[name].broker_addrs
            if addrs:
                broker_addr = addrs[min(addrs)]
                break
        return TopicList(topic_list=sorted(names), broker_addr=broker_addr)

    def unit_topic_list(self) -> TopicList:
        """GET_UNIT_TOPIC_LIST: topics whose first QueueData has the unit flag."""
        return self._topics_by_flag(lambda f: f & TOPIC_SYS_FLAG_UNIT == TOPIC_SYS_FLAG_UNIT)

    def has_unit_sub_topic_list(self) -> TopicList:
        """GET_HAS_UNIT_SUB_TOPIC_LIST: first QueueData has the unit-sub flag."""
        return self._topics_by_flag(
            lambda f: f & TOPIC_SYS_FLAG_UNIT_SUB == TOPIC_SYS_FLAG_UNIT_SUB
        )

    def has_unit_sub_ununit_topic_list(self) -> TopicList:
        """GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: unit-sub flag set, unit flag clear."""
        return self._topics_by_flag(
            lambda f: (
                f & TOPIC_SYS_FLAG_UNIT_SUB == TOPIC_SYS_FLAG_UNIT_SUB
                and f & TOPIC_SYS_FLAG_UNIT != TOPIC_SYS_FLAG_UNIT
            )
        )

    def _topics_by_flag(self, wanted: Callable[[int], bool]) -> TopicList:
        # Upstream looks at the first QueueData in hash order; the smallest broker
        # name stands in for "first" so every node answers alike.
        return TopicList(
            topic_list=sorted(
                topic
                for topic, queues in self._t.topic_queue.items()
                if wanted(queues[min(queues)].topic_sys_flag)
            )
        )

    # ------------------------------------------------------------ KV queries

    def kv_get(self, namespace: str, key: str) -> str | None:
        """GET_KV_CONFIG."""
        return self._t.kv.get(namespace, {}).get(key)

    def kv_list(self, namespace: str) -> KVTable | None:
        """GET_KVLIST_BY_NAMESPACE: None when the namespace never existed."""
        table = self._t.kv.get(namespace)
        return None if table is None else KVTable(table=dict(sorted(table.items())))

    def kv_namespaces(self) -> dict[str, dict[str, str]]:
        """The whole KV config (a copy), as the KV file would hold it."""
        return {ns: dict(sorted(self._t.kv[ns].items())) for ns in sorted(self._t.kv)}

    def kv_bytes(self) -> int:
        """The KV config's total size as ``kvConfigBytesMax`` counts it (UTF-8 bytes of
        every entry's namespace, key and value)."""
        if self._kv_bytes is None:
            self._kv_bytes = rules.kv_bytes(self._t)
        return self._kv_bytes

    # ------------------------------------------------------------ liveness queries

    def query_broker_data_version(self, cluster: str, addr: str) -> DataVersion | None:
        """``queryBrokerTopicConfig``: the live entry's DataVersion."""
        entry = self._t.live.get(BrokerAddrInfo(cluster, addr))
        return None if entry is None else entry.data_version

    def is_broker_topic_config_changed(
        self, cluster: str, addr: str, data_version: DataVersion | None
    ) -> bool:
        """True when the broker is not live or its stored version differs."""
        stored = self.query_broker_data_version(cluster, addr)
        return stored is None or stored != data_version

    def is_topic_config_changed(
        self,
        cluster: str,
        addr: str,
        data_version: DataVersion | None,
        broker_name: str,
        topic: str,
    ) -> bool:
        """True when the version changed or the topic has no queue of this broker."""
        if self.is_broker_topic_config_changed(cluster, addr, data_version):
            return True
        return broker_name not in self._t.topic_queue.get(topic, {})

    def live_brokers(self) -> list[BrokerLiveView]:
        """Every live entry, ordered by (cluster, addr)."""
        return [self._t.live[k] for k in sorted(self._t.live, key=_order)]

    def registered_topics_digest(self, broker_name: str) -> bytes | None:
        """The digest of the topic table ``broker_name``'s master registered last, while
        its queues are still what that registration wrote (``Tables.registered``)."""
        record = self._t.registered.get(broker_name)
        return None if record is None else record.topics_digest

    def live_broker(self, cluster: str, addr: str) -> BrokerLiveView | None:
        """One live entry."""
        return self._t.live.get(BrokerAddrInfo(cluster, addr))

    # ------------------------------------------------------------ snapshot

    def snapshot(self) -> bytes:
        """The whole table in our versioned codec (see :mod:`raftstore.snapshot`)."""
        return snapshot.encode(self._t, self.config, self.applied_version, self.routes_version)

    @classmethod
    def restore(cls, data: bytes) -> RouteTable:
        """A table rebuilt from :meth:`snapshot` output; ValueError on a bad snapshot."""
        tables, config, applied, routes = snapshot.decode(data)
        table = cls(config)
        table._t = tables
        table.applied_version = applied
        table.routes_version = routes
        return table

    def digest(self) -> str:
        """Hex SHA-256 of the state (not the versions): equal state, equal digest."""
        return snapshot.digest(self._t, self.config)

    def digests(self) -> StateDigests:
        """The full digest, the client-view digest and the live brokers (one pass)."""
        return snapshot.digests(self._t, self.config)

    def state_document(self) -> dict[str, Any]:
        """A copy of the state as plain values, for :func:`raftstore.snapshot.digest_of`
        and :func:`~raftstore.snapshot.digests_of` outside the apply lock."""
        return snapshot.canonical_state(self._t, self.config)


def _order(key: BrokerAddrInfo) -> tuple[str, str]:
    return (key.cluster_name, key.broker_addr)


def _with_acting_masters(
    broker_datas: list[BrokerData], queue_datas: list[QueueData]
) -> list[BrokerData]:
    """5.x acting master: a masterless acting group whose queue is read-only shows its
    smallest id as id 0, so clients treat that slave as the (read-only) master."""
    if not any(bd.broker_addrs and MASTER_ID not in bd.broker_addrs for bd in broker_datas):
        return broker_datas
    perm_by_name: dict[str, int] = {}
    for qd in queue_datas:
        perm_by_name.setdefault(qd.broker_name, qd.perm)
    adjusted: list[BrokerData] = []
    for bd in broker_datas:
        perm = perm_by_name.get(bd.broker_name)
        if (
            bd.broker_addrs
            and MASTER_ID not in bd.broker_addrs
            and bd.enable_acting_master
            and perm is not None
            and not is_writeable(perm)
        ):
            addrs = dict(bd.broker_addrs)
            acting_addr = addrs.pop(min(addrs))
            addrs = {MASTER_ID: acting_addr, **addrs}
            bd = BrokerData(
                bd.cluster, bd.broker_name, addrs, bd.zone_name, bd.enable_acting_master
            )
        adjusted.append(bd)
    return adjusted


_HANDLERS: dict[type, Callable[[RouteTable, Any, rules.ChangeSet], _Handled]] = {
    RegisterBroker: RouteTable._register_broker,
    UnregisterBrokers: RouteTable._unregister,
    BrokerHeartbeat: RouteTable._heartbeat,
    QueryDataVersion: RouteTable._query_data_version,
    ExpireBrokers: RouteTable._expire,
    ChannelDestroyed: RouteTable._channel_destroyed,
    PutKV: RouteTable._put_kv,
    DeleteKV: RouteTable._delete_kv,
    WipeWritePerm: RouteTable._wipe_perm,
    AddWritePerm: RouteTable._add_perm,
    DeleteTopic: RouteTable._delete_topic,
    RegisterTopic: RouteTable._register_topic,
    UpdateNamesrvConfig: RouteTable._update_config,
    Barrier: RouteTable._barrier,
}
