"""Upstream's NameServer processor tests, ported as behaviour tests of the dispatch.

Each test is named after its upstream test (RocketMQ's RequestProcessorTest,
ClusterTestRequestProcessorTest readiness tests,
BrokerHousekeepingServiceTest) and runs against a real RouteTable behind a
LocalReplicator, exactly as the gateway wires them.
"""

from __future__ import annotations

import pytest

from gateway.clock import ManualClock
from gateway.dispatch import RequestDispatcher, route_not_found_remark
from gateway.services import NameServerService
from raftstore.config import NamesrvConfig
from raftstore.replicator import LocalReplicator
from remoting import bodies, register_body
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.model import RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from remoting.register_body import body_crc32
from tests.gateway.conftest import DEFAULT_BROKER, build_node, register_default_broker

Node = tuple[LocalReplicator, NameServerService, RequestDispatcher]

BROKER_FIELDS = {
    "brokerName": "broker",
    "brokerAddr": "10.10.1.1",
    "clusterName": "cluster",
    "haServerAddr": "10.10.2.1",
    "brokerId": "2333",
}


def remoting_command(code: int, **extra: str) -> RemotingCommand:
    """Upstream ``getRemotingCommand``: the sample broker fields plus topic, version 0."""
    fields = {**BROKER_FIELDS, "topic": "unit-test0", **extra}
    return RemotingCommand.request(code, fields, version=0)


def sample_register_cmd(version: int) -> RemotingCommand:
    """Upstream ``genSampleRegisterCmd(true)``: two nameless TopicConfigs, masked CRC."""
    wrapper = TopicConfigSerializeWrapper(
        topic_config_table={"unit-test1": TopicConfig(), "unit-test2": TopicConfig()}
    )
    body = register_body.encode_register_broker_body(
        RegisterBrokerBody(wrapper, []), compressed=False
    )
    fields = {**BROKER_FIELDS, "bodyCrc32": str(body_crc32(body)), "compressed": "false"}
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, fields, body, version=version)


def kv_command(code: int, **fields: str) -> RemotingCommand:
    """A KV request with only the given fields."""
    return RemotingCommand.request(code, dict(fields), version=0)


# ---------------------------------------------------------------------- RequestProcessorTest


async def test_process_request_put_kv_config(registered_node: Node) -> None:
    """RequestProcessorTest.testProcessRequest_PutKVConfig."""
    replicator, _, dispatcher = registered_node
    response = await dispatcher.handle(
        kv_command(RequestCode.PUT_KV_CONFIG, namespace="namespace", key="key", value="value")
    )
    assert response is not None
    assert (response.code, response.remark) == (ResponseCode.SUCCESS, None)
    assert replicator.read(lambda t: t.kv_get("namespace", "key")) == "value"


async def test_process_request_get_kv_config_return_not_null(registered_node: Node) -> None:
    """RequestProcessorTest.testProcessRequest_GetKVConfigReturnNotNull."""
    _, service, dispatcher = registered_node
    await service.put_kv(namespace="namespace", key="key", value="value")
    response = await dispatcher.handle(
        kv_command(RequestCode.GET_KV_CONFIG, namespace="namespace", key="key")
    )
    assert response is not None
    assert (response.code, response.remark) == (ResponseCode.SUCCESS, None)
    assert response.ext_fields == {"value": "value"}


async def test_process_request_get_kv_config_return_null(registered_node: Node) -> None:
    """RequestProcessorTest.testProcessRequest_GetKVConfigReturnNull."""
    dispatcher = registered_node[2]
    response = await dispatcher.handle(
        kv_command(RequestCode.GET_KV_CONFIG, namespace="namespace", key="key")
    )
    assert response is not None
    assert response.code == ResponseCode.QUERY_NOT_FOUND
    assert response.remark == "No config item, Namespace: namespace Key: key"
    assert response.ext_fields == {}


async def test_process_request_delete_kv_config(registered_node: Node) -> None:
    """RequestProcessorTest.testProcessRequest_DeleteKVConfig."""
    replicator, service, dispatcher = registered_node
    await service.put_kv(namespace="namespace", key="key", value="value")
    response = await dispatcher.handle(
        kv_command(RequestCode.DELETE_KV_CONFIG, namespace="namespace", key="key")
    )
    assert response is not None
    assert (response.code, response.remark) == (ResponseCode.SUCCESS, None)
    assert replicator.read(lambda t: t.kv_get("namespace", "key")) is None


async def test_process_request_un_supported_request(registered_node: Node) -> None:
    """RequestProcessorTest.testProcessRequest_UnSupportedRequest."""
    response = await registered_node[2].handle(RemotingCommand.request(99999, version=0))
    assert response is not None
    assert response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert response.remark == " request type 99999 not supported"


@pytest.mark.parametrize(
    "blacklisted",
    ["configStorePath=test/path", "kvConfigPath=test/path", "configBlackList=test;path"],
)
async def test_process_request_update_config_path(registered_node: Node, blacklisted: str) -> None:
    """RequestProcessorTest.testProcessRequest_UpdateConfigPath."""
    replicator, _, dispatcher = registered_node
    allowed = RemotingCommand.request(
        RequestCode.UPDATE_NAMESRV_CONFIG, body=b"enableTopicList=true", version=0
    )
    response = await dispatcher.handle(allowed)
    assert response is not None and response.code == ResponseCode.SUCCESS
    refused = RemotingCommand.request(
        RequestCode.UPDATE_NAMESRV_CONFIG, body=blacklisted.encode(), version=0
    )
    response = await dispatcher.handle(refused)
    assert response is not None
    assert response.code == ResponseCode.NO_PERMISSION
    assert response.remark is not None and "Can not update config in black list." in response.remark
    assert replicator.read(lambda t: t.config.config_store_path) == "~/namesrv/namesrv.properties"


async def test_process_request_register_broker(registered_node: Node) -> None:
    """RequestProcessorTest.testProcessRequest_RegisterBroker (version 0: bare wrapper)."""
    replicator, _, dispatcher = registered_node
    response = await dispatcher.handle(sample_register_cmd(version=0))
    assert response is not None
    assert (response.code, response.remark) == (ResponseCode.SUCCESS, None)
    group = replicator.read(lambda t: t.broker_datas()["broker"])
    assert (group.broker_name, group.broker_addrs) == ("broker", {2333: "10.10.1.1"})
    # Below version 37 the RegisterBrokerBody is read as a bare wrapper: no topics.
    assert replicator.read(lambda t: t.pickup_topic_route("unit-test2")) is None


async def test_process_request_register_broker_with_filter_server(registered_node: Node) -> None:
    """RequestProcessorTest.testProcessRequest_RegisterBrokerWithFilterServer (version 100)."""
    replicator, _, dispatcher = registered_node
    response = await dispatcher.handle(sample_register_cmd(version=100))
    assert response is not None
    assert (response.code, response.remark) == (ResponseCode.SUCCESS, None)
    group = replicator.read(lambda t: t.broker_datas()["broker"])
    assert (group.broker_name, group.broker_addrs) == ("broker", {2333: "10.10.1.1"})


async def test_process_request_unregister_broker(registered_node: Node) -> None:
    """RequestProcessorTest.testProcessRequest_UnregisterBroker.

    Upstream only queues the unregistration; here it is applied before the
    answer, so ``broker`` is gone while ``default-broker`` remains.
    """
    replicator, _, dispatcher = registered_node
    await dispatcher.handle(sample_register_cmd(version=100))
    response = await dispatcher.handle(remoting_command(RequestCode.UNREGISTER_BROKER))
    assert response is not None
    assert (response.code, response.remark) == (ResponseCode.SUCCESS, None)
    groups = replicator.read(lambda t: t.broker_datas())
    assert list(groups) == [DEFAULT_BROKER]


async def test_get_all_topic_list(registered_node: Node) -> None:
    """RequestProcessorTest.testGetAllTopicList: 0, then 1 once enableAllTopicList is off."""
    _, service, dispatcher = registered_node
    request = remoting_command(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    response = await dispatcher.handle(request)
    assert response is not None
    assert (response.code, response.remark) == (ResponseCode.SUCCESS, None)
    await service.update_namesrv_config({"enableAllTopicList": "false"})
    response = await dispatcher.handle(request)
    assert response is not None
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "disable")


async def test_get_route_info_by_topic(registered_node: Node) -> None:
    """RequestProcessorTest.testGetRouteInfoByTopic: 0 for unit-test0, 17 for ``test``."""
    dispatcher = registered_node[2]
    response = await dispatcher.handle(remoting_command(RequestCode.GET_ROUTEINFO_BY_TOPIC))
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert response.body is not None
    route = bodies.decode_topic_route_data(response.body)
    assert [qd.broker_name for qd in route.queue_datas] == [DEFAULT_BROKER]
    response = await dispatcher.handle(
        remoting_command(RequestCode.GET_ROUTEINFO_BY_TOPIC, topic="test")
    )
    assert response is not None
    assert response.code == ResponseCode.TOPIC_NOT_EXIST
    assert response.remark == route_not_found_remark("test")
    assert response.body is None


async def test_get_broker_cluster_info(registered_node: Node) -> None:
    """RequestProcessorTest.testGetBrokerClusterInfo."""
    response = await registered_node[2].handle(
        remoting_command(RequestCode.GET_BROKER_CLUSTER_INFO)
    )
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert response.body is not None
    info = bodies.decode_cluster_info(response.body)
    assert info.cluster_addr_table == {"default-cluster": [DEFAULT_BROKER]}


async def test_query_data_version(registered_node: Node) -> None:
    """RequestProcessorTest.testQueryDataVersion: no body, unknown broker, changed=true."""
    response = await registered_node[2].handle(remoting_command(RequestCode.QUERY_DATA_VERSION))
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert response.ext_fields == {"changed": "true"}
    assert response.body is None


async def test_get_broker_member_broker(registered_node: Node) -> None:
    """RequestProcessorTest.testGetBrokerMemberBroker."""
    response = await registered_node[2].handle(
        remoting_command(RequestCode.GET_BROKER_MEMBER_GROUP)
    )
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert response.body is not None
    group = bodies.decode_broker_member_group(response.body)
    assert (group.cluster, group.broker_name, group.broker_addrs) == ("cluster", "broker", {})


async def test_broker_heart_beat(registered_node: Node) -> None:
    """RequestProcessorTest.testBrokerHeartBeat: a two-way heartbeat is answered 0."""
    response = await registered_node[2].handle(remoting_command(RequestCode.BROKER_HEARTBEAT))
    assert response is not None and response.code == ResponseCode.SUCCESS


async def test_add_write_perm_of_broker(registered_node: Node) -> None:
    """RequestProcessorTest.testAddWritePermOfBroker."""
    response = await registered_node[2].handle(
        remoting_command(RequestCode.ADD_WRITE_PERM_OF_BROKER)
    )
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert response.ext_fields == {"addTopicCount": "0"}


async def test_wipe_write_perm_of_broker(registered_node: Node) -> None:
    """RequestProcessorTest.testWipeWritePermOfBroker."""
    response = await registered_node[2].handle(
        remoting_command(RequestCode.WIPE_WRITE_PERM_OF_BROKER)
    )
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert response.ext_fields == {"wipeTopicCount": "0"}


async def test_get_all_topic_list_from_nameserver(registered_node: Node) -> None:
    """RequestProcessorTest.testGetAllTopicListFromNameserver."""
    response = await registered_node[2].handle(
        remoting_command(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    )
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert response.body is not None
    assert bodies.decode_topic_list(response.body).topic_list == ["unit-test0", "unit-test1"]


async def test_delete_topic_in_namesrv(registered_node: Node) -> None:
    """RequestProcessorTest.testDeleteTopicInNamesrv: an unknown cluster deletes nothing."""
    replicator, _, dispatcher = registered_node
    response = await dispatcher.handle(remoting_command(RequestCode.DELETE_TOPIC_IN_NAMESRV))
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert replicator.read(lambda t: t.pickup_topic_route("unit-test0")) is not None


async def test_get_kv_list_by_namespace(registered_node: Node) -> None:
    """RequestProcessorTest.testGetKVListByNamespace: 22, then 0 after a put."""
    _, service, dispatcher = registered_node
    request = kv_command(RequestCode.GET_KVLIST_BY_NAMESPACE, namespace="default-namespace-1")
    response = await dispatcher.handle(request)
    assert response is not None and response.code == ResponseCode.QUERY_NOT_FOUND
    await service.put_kv(namespace="default-namespace-1", key="key", value="value")
    response = await dispatcher.handle(request)
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert response.body is not None
    assert bodies.decode_kv_table(response.body).table == {"key": "value"}


async def test_get_topics_by_cluster(registered_node: Node) -> None:
    """RequestProcessorTest.testGetTopicsByCluster."""
    response = await registered_node[2].handle(
        remoting_command(RequestCode.GET_TOPICS_BY_CLUSTER, cluster="default-cluster")
    )
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert response.body is not None
    assert bodies.decode_topic_list(response.body).topic_list == ["unit-test0", "unit-test1"]


async def test_get_system_topic_list_from_ns(registered_node: Node) -> None:
    """RequestProcessorTest.testGetSystemTopicListFromNs."""
    response = await registered_node[2].handle(
        remoting_command(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
    )
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert response.body is not None
    topics = bodies.decode_topic_list(response.body)
    assert sorted(topics.topic_list) == ["default-broker", "default-cluster"]
    assert topics.broker_addr == "127.0.0.1:10911"


@pytest.mark.parametrize(
    "code",
    [
        RequestCode.GET_UNIT_TOPIC_LIST,
        RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST,
        RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
    ],
)
async def test_get_unit_topic_lists(registered_node: Node, code: RequestCode) -> None:
    """RequestProcessorTest.testGetUnitTopicList, testGetHasUnitSubTopicList and
    testGetHasUnitSubUnUnitTopicList: 0 with an empty list, 1 "disable" when off."""
    _, service, dispatcher = registered_node
    response = await dispatcher.handle(remoting_command(code))
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert response.body is not None
    assert bodies.decode_topic_list(response.body).topic_list == []
    await service.update_namesrv_config({"enableTopicList": "false"})
    response = await dispatcher.handle(remoting_command(code))
    assert response is not None
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "disable")


async def test_update_config(registered_node: Node) -> None:
    """RequestProcessorTest.testUpdateConfig: a Java Map's toString is one odd property."""
    replicator, _, dispatcher = registered_node
    before = replicator.read(lambda t: t.config)
    response = await dispatcher.handle(
        RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"{key=value}", version=0)
    )
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert replicator.read(lambda t: t.config) == before


async def test_get_config(registered_node: Node) -> None:
    """RequestProcessorTest.testGetConfig: sorted ``key=value`` lines."""
    response = await registered_node[2].handle(
        RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG, version=0)
    )
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert response.body is not None
    lines = response.body.decode().splitlines()
    assert "enableAllTopicList=true" in lines
    assert lines == sorted(lines)


# ---------------------------------------------------- ClusterTestRequestProcessorTest


async def test_cluster_test_get_route_info_by_topic(registered_node: Node) -> None:
    """ClusterTestRequestProcessorTest.testGetRouteInfoByTopic: no topic → 17, no body."""
    response = await registered_node[2].handle(
        RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {}, version=0)
    )
    assert response is not None
    assert response.code == ResponseCode.TOPIC_NOT_EXIST
    assert response.body is None
    assert response.remark == route_not_found_remark(None)


async def _route_code(
    need_wait: bool, wait_s: int, clock: ManualClock
) -> tuple[RequestDispatcher, RemotingCommand]:
    config = NamesrvConfig(need_wait_for_service=need_wait, wait_seconds_for_service=wait_s)
    _, service, dispatcher = build_node(config, clock)
    await register_default_broker(service)
    return dispatcher, remoting_command(RequestCode.GET_ROUTEINFO_BY_TOPIC)


async def test_namesrv_ready(clock: ManualClock) -> None:
    """ClusterTestRequestProcessorTest.testNamesrvReady: wait 0 s → ready at once."""
    dispatcher, request = await _route_code(True, 0, clock)
    response = await dispatcher.handle(request)
    assert response is not None and response.code == ResponseCode.SUCCESS


async def test_namesrv_no_need_wait_for_service(clock: ManualClock) -> None:
    """ClusterTestRequestProcessorTest.testNamesrvNoNeedWaitForService."""
    dispatcher, request = await _route_code(False, 45, clock)
    response = await dispatcher.handle(request)
    assert response is not None and response.code == ResponseCode.SUCCESS


async def test_namesrv_not_ready(clock: ManualClock) -> None:
    """ClusterTestRequestProcessorTest.testNamesrvNotReady."""
    dispatcher, request = await _route_code(True, 45, clock)
    response = await dispatcher.handle(request)
    assert response is not None
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "name server not ready")


async def test_namesrv(clock: ManualClock) -> None:
    """ClusterTestRequestProcessorTest.testNamesrv: not ready for 3 s, ready after 4 s."""
    dispatcher, request = await _route_code(True, 3, clock)
    response = await dispatcher.handle(request)
    assert response is not None and response.code == ResponseCode.SYSTEM_ERROR
    clock.advance(4_000)
    response = await dispatcher.handle(request)
    assert response is not None and response.code == ResponseCode.SUCCESS


# ---------------------------------------------------------- BrokerHousekeepingServiceTest


@pytest.mark.parametrize(
    "upstream_name", ["testOnChannelClose", "testOnChannelException", "testOnChannelIdle"]
)
async def test_channel_events_tolerate_a_null_channel(
    registered_node: Node, upstream_name: str
) -> None:
    """BrokerHousekeepingServiceTest.testOnChannelClose / testOnChannelException /
    testOnChannelIdle: a null channel (and an unknown one) changes nothing."""
    replicator, service, _ = registered_node
    version = replicator.read(lambda t: t.applied_version)
    await service.channel_destroyed(None)
    await service.channel_destroyed("127.0.0.1:9876")
    assert replicator.read(lambda t: t.applied_version) == version
    assert replicator.read(lambda t: t.pickup_topic_route("unit-test0")) is not None


async def test_closing_the_registering_channel_drops_the_broker(registered_node: Node) -> None:
    """BrokerHousekeepingService.onChannelDestroy with the broker's own channel."""
    replicator, service, _ = registered_node
    await service.channel_destroyed("default-channel")
    assert replicator.read(lambda t: t.pickup_topic_route("unit-test0")) is None
    assert replicator.read(lambda t: t.broker_datas()) == {}
