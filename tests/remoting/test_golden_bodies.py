"""Golden bodies: JSON bodies as RocketMQ 4.9/5.x brokers and clients write them, byte for byte."""

from __future__ import annotations

import pytest

from remoting import bodies, register_body
from remoting.model import (
    BrokerData,
    BrokerMemberGroup,
    ClusterInfo,
    DataVersion,
    KVTable,
    QueueData,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicQueueMappingInfo,
    TopicRouteData,
)

ROUTE_PLAIN = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},'
    b'"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],'
    b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
    b'"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)
ROUTE_STANDARD = ROUTE_PLAIN.replace(b"{0:", b'{"0":').replace(b",1:", b',"1":')
ROUTE_4_9_4 = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":'
    b'"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)
CLUSTER_INFO_4_9_4 = (
    b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},'
    b'"brokerName":"broker-a","cluster":"DefaultCluster"}},'
    b'"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
)
TOPIC_CONFIG = (
    b'{"attributes":{},"order":false,"perm":6,"readQueueNums":16,'
    b'"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,'
    b'"writeQueueNums":16}'
)
DATA_VERSION = b'{"counter":3,"stateVersion":0,"timestamp":1700000000000}'
MAPPING_INFO_PLAIN = (
    b'{"bname":"broker-a","currIdMap":{0:0,1:1},"dirty":false,"epoch":1,'
    b'"scope":"__global__","topic":"T","totalQueues":4}'
)
MAPPING_INFO_STANDARD = MAPPING_INFO_PLAIN.replace(b"{0:0,1:1}", b'{"0":0,"1":1}')
REGISTER_BODY_5X = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":'
    + DATA_VERSION
    + b',"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":0},'
    b'"topicConfigTable":{"TopicTest":' + TOPIC_CONFIG + b"},"
    b'"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}}'
)
REGISTER_BODY_4X = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":'
    + DATA_VERSION
    + b',"topicConfigTable":{"TopicTest":'
    + TOPIC_CONFIG
    + b"}}}"
)

BROKER_A = BrokerData(
    cluster="DefaultCluster",
    broker_name="broker-a",
    broker_addrs={0: "127.0.0.1:10911", 1: "127.0.0.1:10921"},
)
ROUTE = TopicRouteData(
    queue_datas=[QueueData("broker-a", read_queue_nums=4, write_queue_nums=4, perm=6)],
    broker_datas=[BROKER_A],
)
TOPIC_TEST = TopicConfig(topic_name="TopicTest")
MAPPING_INFO = TopicQueueMappingInfo(
    topic="T", total_queues=4, bname="broker-a", epoch=1, curr_id_map={0: 0, 1: 1}
)


@pytest.mark.parametrize(("standard", "golden"), [(False, ROUTE_PLAIN), (True, ROUTE_STANDARD)])
def test_it_writes_and_reads_the_route_sample_in_both_styles(standard: bool, golden: bytes) -> None:
    assert bodies.encode_topic_route_data(ROUTE, standard=standard) == golden
    assert bodies.decode_topic_route_data(golden) == ROUTE


def test_it_reads_the_route_the_4_9_4_server_sent() -> None:
    route = bodies.decode_topic_route_data(ROUTE_4_9_4)
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911"}
    assert route.broker_datas[0].enable_acting_master is False
    assert route.queue_datas == [QueueData("broker-a", 4, 4, 6, 0)]


def test_it_reads_the_pre_4_9_spelling_of_the_topic_sys_flag() -> None:
    body = ROUTE_PLAIN.replace(b'"topicSysFlag":0', b'"topicSynFlag":1')
    assert bodies.decode_topic_route_data(body).queue_datas[0].topic_sys_flag == 1


def test_it_writes_order_conf_and_mapping_by_broker_when_present() -> None:
    route = TopicRouteData(
        order_topic_conf="broker-a:8", topic_queue_mapping_by_broker={"broker-a": MAPPING_INFO}
    )
    encoded = bodies.encode_topic_route_data(route, standard=False)
    assert encoded == (
        b'{"brokerDatas":[],"filterServerTable":{},"orderTopicConf":"broker-a:8",'
        b'"queueDatas":[],"topicQueueMappingByBroker":{"broker-a":' + MAPPING_INFO_PLAIN + b"}}"
    )
    assert bodies.decode_topic_route_data(encoded) == route


def test_it_writes_a_zone_name_after_enable_acting_master() -> None:
    broker = BrokerData("c", "b", {0: "a:1"}, zone_name="zone-1", enable_acting_master=True)
    encoded = bodies.encode_topic_route_data(TopicRouteData(broker_datas=[broker]), standard=True)
    assert b'"enableActingMaster":true,"zoneName":"zone-1"}' in encoded
    assert bodies.decode_topic_route_data(encoded).broker_datas == [broker]


def test_it_writes_and_reads_cluster_info_in_the_plain_style() -> None:
    info = ClusterInfo(
        broker_addr_table={"broker-a": BROKER_A},
        cluster_addr_table={"DefaultCluster": ["broker-a"]},
    )
    golden_5x = CLUSTER_INFO_4_9_4.replace(
        b'"cluster":"DefaultCluster"}', b'"cluster":"DefaultCluster","enableActingMaster":false}'
    )
    assert bodies.encode_cluster_info(info) == golden_5x
    assert bodies.decode_cluster_info(golden_5x) == info
    assert bodies.decode_cluster_info(CLUSTER_INFO_4_9_4) == info


def test_it_writes_the_empty_cluster_info_like_the_real_server() -> None:
    empty = b'{"brokerAddrTable":{},"clusterAddrTable":{}}'
    assert bodies.encode_cluster_info(ClusterInfo()) == empty
    assert bodies.decode_cluster_info(empty) == ClusterInfo()


@pytest.mark.parametrize("standard", [False, True])
def test_it_writes_and_reads_a_kv_table(standard: bool) -> None:
    golden = b'{"table":{"TopicTest":"broker-a:8;broker-b:8"}}'
    table = KVTable({"TopicTest": "broker-a:8;broker-b:8"})
    assert bodies.encode_kv_table(table, standard=standard) == golden
    assert bodies.decode_kv_table(golden) == table


@pytest.mark.parametrize(
    ("topics", "golden"),
    [
        (TopicList(["A", "B"]), b'{"topicList":["A","B"]}'),
        (
            TopicList(["DefaultCluster", "broker-a"], broker_addr="127.0.0.1:10911"),
            b'{"brokerAddr":"127.0.0.1:10911","topicList":["DefaultCluster","broker-a"]}',
        ),
    ],
)
def test_it_writes_and_reads_a_topic_list(topics: TopicList, golden: bytes) -> None:
    assert bodies.encode_topic_list(topics) == golden
    assert bodies.encode_topic_list(topics, standard=True) == golden
    assert bodies.decode_topic_list(golden) == topics


def test_it_writes_and_reads_a_data_version() -> None:
    version = DataVersion(state_version=0, timestamp=1700000000000, counter=3)
    assert bodies.encode_data_version(version) == DATA_VERSION
    assert bodies.decode_data_version(DATA_VERSION) == version


def test_it_reads_a_4x_data_version_without_state_version() -> None:
    assert bodies.decode_data_version(b'{"counter":3,"timestamp":17}') == DataVersion(0, 17, 3)


def test_it_reads_a_missing_data_version_body_as_none() -> None:
    assert bodies.decode_data_version(None) is None
    assert bodies.decode_data_version(b"") is None


@pytest.mark.parametrize("standard", [False, True])
def test_it_writes_and_reads_a_topic_config(standard: bool) -> None:
    assert bodies.encode_topic_config(TOPIC_TEST, standard=standard) == TOPIC_CONFIG
    assert bodies.decode_topic_config(TOPIC_CONFIG) == TOPIC_TEST


@pytest.mark.parametrize(
    ("standard", "golden"), [(False, MAPPING_INFO_PLAIN), (True, MAPPING_INFO_STANDARD)]
)
def test_it_writes_and_reads_a_topic_queue_mapping_info(standard: bool, golden: bytes) -> None:
    assert bodies.encode_topic_queue_mapping_info(MAPPING_INFO, standard=standard) == golden
    assert bodies.decode_topic_queue_mapping_info(golden) == MAPPING_INFO


@pytest.mark.parametrize(
    ("standard", "golden"),
    [
        (
            False,
            b'{"brokerMemberGroup":{"brokerAddrs":{0:"127.0.0.1:10911"},'
            b'"brokerName":"broker-a","cluster":"DefaultCluster"}}',
        ),
        (
            True,
            b'{"brokerMemberGroup":{"brokerAddrs":{"0":"127.0.0.1:10911"},'
            b'"brokerName":"broker-a","cluster":"DefaultCluster"}}',
        ),
    ],
)
def test_it_writes_and_reads_the_broker_member_group_answer(standard: bool, golden: bytes) -> None:
    group = BrokerMemberGroup("DefaultCluster", "broker-a", {0: "127.0.0.1:10911"})
    assert bodies.encode_broker_member_group(group, standard=standard) == golden
    assert bodies.decode_broker_member_group(golden) == group


def test_it_writes_and_reads_the_5x_register_broker_body() -> None:
    body = RegisterBrokerBody(
        TopicConfigSerializeWrapper(
            data_version=DataVersion(0, 1700000000000, 3),
            topic_config_table={"TopicTest": TOPIC_TEST},
            mapping_data_version=DataVersion(),
        )
    )
    assert register_body.encode_register_broker_body(body, compressed=False) == REGISTER_BODY_5X
    decoded = register_body.decode_register_broker_body(
        REGISTER_BODY_5X, compressed=False, version=479
    )
    assert decoded == body


def test_it_writes_and_reads_the_4x_register_broker_body() -> None:
    body = RegisterBrokerBody(
        TopicConfigSerializeWrapper(
            data_version=DataVersion(0, 1700000000000, 3),
            topic_config_table={"TopicTest": TOPIC_TEST},
        )
    )
    assert register_body.encode_register_broker_body(body, compressed=False, version=409) == (
        REGISTER_BODY_4X
    )
    assert register_body.decode_register_broker_body(
        REGISTER_BODY_4X, compressed=False, version=409
    ) == (body)


def test_it_reads_a_4x_topic_config_without_attributes() -> None:
    legacy = TOPIC_CONFIG.replace(b'"attributes":{},', b"")
    assert bodies.decode_topic_config(legacy) == TOPIC_TEST


def test_it_writes_and_reads_the_kv_config_file() -> None:
    golden = b'{"configTable":{"ORDER_TOPIC_CONFIG":{"k":"v"}}}'
    table = {"ORDER_TOPIC_CONFIG": {"k": "v"}}
    assert bodies.encode_kv_config_wrapper(table) == golden
    assert bodies.decode_kv_config_wrapper(golden) == table


def test_it_quotes_keys_and_escapes_non_ascii_only_in_the_standard_style() -> None:
    broker = BrokerData("DefaultCluster", "brokér", {0: "h:1"})
    route = TopicRouteData(broker_datas=[broker])
    assert '"brokerName":"brokér"'.encode() in bodies.encode_topic_route_data(route, standard=False)
    standard = bodies.encode_topic_route_data(route, standard=True)
    assert b'"brokerName":"brok\\u00E9r"' in standard
    assert bodies.decode_topic_route_data(standard) == route
