"""Hypothesis strategies for random route-table command sequences over a small world
(few clusters, brokers, addresses and topics, so commands collide often)."""

from __future__ import annotations

from hypothesis import strategies as st

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
    UnregisterRequest,
    UpdateNamesrvConfig,
    WipeWritePerm,
)
from remoting.model import (
    NAMESPACE_ORDER_TOPIC_CONFIG,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicQueueMappingInfo,
)

CLUSTERS = ("c1", "c2")
NAMES = ("a", "b", "c")
ADDRS = ("10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911", "10.0.0.4:10911")
TOPICS = ("T1", "T2", "T3", "T4")
CHANNELS = ("ch1", "ch2", "ch3")
BASE_MS = 1_700_000_000_000
SPAN_MS = 400_000

clusters = st.sampled_from(CLUSTERS)
names = st.sampled_from(NAMES)
addrs = st.sampled_from(ADDRS)
topic_names = st.sampled_from(TOPICS)
times = st.integers(BASE_MS, BASE_MS + SPAN_MS)
broker_ids = st.integers(0, 2)
versions = st.builds(DataVersion, st.integers(0, 2), st.integers(0, 2), st.integers(0, 2))

topic_configs = st.builds(
    TopicConfig,
    topic_name=topic_names,
    read_queue_nums=st.integers(1, 4),
    write_queue_nums=st.integers(1, 4),
    perm=st.sampled_from((2, 4, 6, 7)),
    topic_sys_flag=st.integers(0, 3),
)
mapping_infos = st.builds(
    TopicQueueMappingInfo,
    topic=topic_names,
    total_queues=st.integers(0, 4),
    bname=st.none() | names,
    epoch=st.integers(0, 3),
    curr_id_map=st.none() | st.dictionaries(st.integers(0, 3), st.integers(0, 3), max_size=2),
)
wrappers = st.builds(
    TopicConfigSerializeWrapper,
    data_version=versions,
    topic_config_table=st.lists(topic_configs, max_size=4).map(
        lambda tcs: {tc.topic_name or "": tc for tc in tcs}
    ),
    topic_queue_mapping_info_map=st.dictionaries(topic_names, mapping_infos, max_size=1),
)

register_brokers = st.builds(
    RegisterBroker,
    cluster_name=clusters,
    broker_addr=addrs,
    broker_name=names,
    broker_id=broker_ids,
    ha_server_addr=st.sampled_from(("", "10.0.0.9:10912")),
    now_ms=times,
    topic_config_wrapper=st.none() | wrappers,
    filter_server_list=st.none() | st.lists(st.sampled_from(("f1", "f2")), max_size=2).map(tuple),
    zone_name=st.none() | st.sampled_from(("", "z1")),
    heartbeat_timeout_ms=st.none() | st.sampled_from((10_000, 120_000)),
    enable_acting_master=st.none() | st.booleans(),
    channel=st.none() | st.sampled_from(CHANNELS),
)
unregister_requests = st.builds(UnregisterRequest, clusters, addrs, names, broker_ids)
heartbeats = st.builds(BrokerHeartbeat, clusters, addrs, times)
query_versions = st.builds(
    QueryDataVersion, clusters, addrs, names, broker_ids, st.none() | versions, times
)
config_updates = st.lists(
    st.tuples(
        st.sampled_from(
            (
                "supportActingMaster",
                "deleteTopicWithBrokerRegistration",
                "notifyMinBrokerIdChanged",
                "orderMessageEnable",
                "returnOrderTopicConfigToBroker",
                "kvConfigPath",
                "listenPort",
            )
        ),
        st.sampled_from(("true", "false", "9877", "bad")),
    ),
    max_size=3,
).map(tuple)

liveness_commands: st.SearchStrategy[Command] = heartbeats | query_versions

commands: st.SearchStrategy[Command] = st.one_of(
    register_brokers,
    register_brokers,
    register_brokers,
    st.lists(unregister_requests, min_size=1, max_size=3).map(
        lambda rs: UnregisterBrokers(tuple(rs))
    ),
    heartbeats,
    query_versions,
    st.builds(ExpireBrokers, times, st.sampled_from((0, 1_000))),
    st.builds(ChannelDestroyed, st.sampled_from(CHANNELS)),
    st.builds(
        PutKV,
        st.sampled_from((NAMESPACE_ORDER_TOPIC_CONFIG, "ns")),
        topic_names,
        st.sampled_from(("a:1", "b:2")),
    ),
    st.builds(DeleteKV, st.sampled_from((NAMESPACE_ORDER_TOPIC_CONFIG, "ns")), topic_names),
    st.builds(WipeWritePerm, names),
    st.builds(AddWritePerm, names),
    st.builds(DeleteTopic, topic_names, st.none() | clusters),
    st.builds(
        RegisterTopic,
        topic_names,
        st.lists(
            st.builds(
                QueueData,
                st.sampled_from((*NAMES, "ghost")),
                st.integers(1, 4),
                st.integers(1, 4),
                st.sampled_from((4, 6)),
            ),
            max_size=3,
        ).map(tuple),
    ),
    st.builds(UpdateNamesrvConfig, config_updates),
    st.just(Barrier()),
)
command_lists = st.lists(commands, max_size=40)
