"""REGISTER_BROKER through the dispatch: CRC, body versions, slave answers, order config."""

from __future__ import annotations

from gateway.dispatch import RequestDispatcher
from gateway.registration import Kind, Refused, Registered, Registrar
from gateway.services import NameServerService
from raftstore.config import NamesrvConfig
from raftstore.replicator import LocalReplicator
from remoting import bodies, register_body
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.model import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from remoting.register_body import body_crc32
from remoting.register_request import BrokerRegistration, RegisterBrokerRequest
from tests.gateway.conftest import build_node

Node = tuple[LocalReplicator, NameServerService, RequestDispatcher]

MASTER_ADDR = "127.0.0.1:10911"
MASTER_HA = "127.0.0.1:10912"
SLAVE_ADDR = "127.0.0.1:10921"
SLAVE_HA = "127.0.0.1:10922"


def register_request(
    broker_id: int,
    addr: str,
    ha: str,
    *topics: str,
    crc: int | None = None,
    compressed: bool = False,
    version: int = 479,
    **extra: str,
) -> RemotingCommand:
    """A 5.x broker's REGISTER_BROKER for broker-a with the given topics (8 queues each)."""
    wrapper = TopicConfigSerializeWrapper(
        data_version=DataVersion(timestamp=1, counter=1),
        topic_config_table={t: TopicConfig(t, 8, 8) for t in topics},
    )
    body = register_body.encode_register_broker_body(
        RegisterBrokerBody(wrapper, []), compressed=compressed, version=version
    )
    fields = {
        "brokerName": "broker-a",
        "brokerAddr": addr,
        "clusterName": "DefaultCluster",
        "haServerAddr": ha,
        "brokerId": str(broker_id),
        "enableActingMaster": "false",
        "compressed": "true" if compressed else "false",
        "bodyCrc32": str(body_crc32(body) if crc is None else crc),
        **extra,
    }
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, fields, body, version=version)


async def test_a_master_gets_empty_ext_fields_and_no_body(node: Node) -> None:
    """A master learns nothing: extFields {} and no KVTable while ORDER_TOPIC_CONFIG is absent."""
    response = await node[2].handle(register_request(0, MASTER_ADDR, MASTER_HA, "T1", "T2"))
    assert response is not None
    assert (response.code, response.ext_fields, response.body) == (ResponseCode.SUCCESS, {}, None)


async def test_a_slave_learns_its_master_and_ha_address(node: Node) -> None:
    """The slave's answer names the live master's address and HA address."""
    dispatcher = node[2]
    await dispatcher.handle(register_request(0, MASTER_ADDR, MASTER_HA, "T1", "T2"))
    response = await dispatcher.handle(register_request(1, SLAVE_ADDR, SLAVE_HA, "T1", "T2"))
    assert response is not None
    assert response.ext_fields == {"haServerAddr": MASTER_HA, "masterAddr": MASTER_ADDR}


async def test_it_rejects_a_body_whose_crc_does_not_match(node: Node) -> None:
    """bodyCrc32 != 0 and wrong: 1 "crc32 not match", nothing registered."""
    replicator, _, dispatcher = node
    response = await dispatcher.handle(
        register_request(0, MASTER_ADDR, MASTER_HA, "T1", "T2", crc=7)
    )
    assert response is not None
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    assert replicator.read(lambda t: t.broker_datas()) == {}


async def test_it_skips_the_crc_check_when_the_broker_sends_zero(node: Node) -> None:
    """bodyCrc32 0 means "not computed" upstream."""
    response = await node[2].handle(register_request(0, MASTER_ADDR, MASTER_HA, "T1", "T2", crc=0))
    assert response is not None and response.code == ResponseCode.SUCCESS


async def test_it_reads_a_compressed_body(node: Node) -> None:
    """compressed=true: the zlib binary body registers its topics."""
    replicator, _, dispatcher = node
    request = register_request(0, MASTER_ADDR, MASTER_HA, "T1", "T2", compressed=True)
    response = await dispatcher.handle(request)
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert replicator.read(lambda t: t.all_topic_list().topic_list) == ["T1", "T2"]


async def test_a_new_broker_with_a_single_topic_cannot_register(node: Node) -> None:
    """5.x single-topic guard: 1 "register broker failed"."""
    response = await node[2].handle(register_request(0, MASTER_ADDR, MASTER_HA, "T1"))
    assert response is not None
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "register broker failed")


async def test_it_returns_the_order_topic_config_to_the_broker(node: Node) -> None:
    """The ORDER_TOPIC_CONFIG namespace comes back as a KVTable body."""
    _, service, dispatcher = node
    await service.put_kv(namespace="ORDER_TOPIC_CONFIG", key="T1", value="broker-a:8")
    response = await dispatcher.handle(register_request(0, MASTER_ADDR, MASTER_HA, "T1", "T2"))
    assert response is not None and response.body is not None
    assert bodies.decode_kv_table(response.body).table == {"T1": "broker-a:8"}


async def test_it_keeps_the_order_config_when_told_not_to_return_it() -> None:
    """returnOrderTopicConfigToBroker=false: no body even though the namespace exists."""
    _, service, dispatcher = build_node(NamesrvConfig(return_order_topic_config_to_broker=False))
    await service.put_kv(namespace="ORDER_TOPIC_CONFIG", key="T1", value="broker-a:8")
    response = await dispatcher.handle(register_request(0, MASTER_ADDR, MASTER_HA, "T1", "T2"))
    assert response is not None and response.body is None


async def test_the_zone_extfield_becomes_the_broker_zone(node: Node) -> None:
    """__ZONE_NAME sets BrokerData.zoneName; unknown extFields (ACL keys) are ignored."""
    replicator, _, dispatcher = node
    request = register_request(
        0, MASTER_ADDR, MASTER_HA, "T1", "T2", __ZONE_NAME="zone1", AccessKey="ak", Signature="s"
    )
    response = await dispatcher.handle(request)
    assert response is not None and response.code == ResponseCode.SUCCESS
    assert replicator.read(lambda t: t.broker_datas()["broker-a"].zone_name) == "zone1"


async def test_a_malformed_broker_id_is_a_system_error_naming_the_field(node: Node) -> None:
    """Bad header numbers: 1 with a remark that names the field."""
    request = register_request(0, MASTER_ADDR, MASTER_HA, "T1", "T2")
    assert request.ext_fields is not None
    request.ext_fields["brokerId"] = "zero"
    response = await node[2].handle(request)
    assert response is not None
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark is not None and "brokerId" in response.remark


async def test_an_undecodable_body_is_a_system_error(node: Node) -> None:
    """A body that is not JSON: 1 with the decoder's message, nothing registered."""
    replicator, _, dispatcher = node
    request = register_request(0, MASTER_ADDR, MASTER_HA, "T1", "T2")
    request.body = b"{not json"
    assert request.ext_fields is not None
    request.ext_fields["bodyCrc32"] = "0"
    response = await dispatcher.handle(request)
    assert response is not None and response.code == ResponseCode.SYSTEM_ERROR
    assert replicator.read(lambda t: t.broker_datas()) == {}


async def test_a_one_way_registration_is_applied_but_never_answered(node: Node) -> None:
    """One-way requests produce no answer, success or not."""
    replicator, _, dispatcher = node
    request = register_request(0, MASTER_ADDR, MASTER_HA, "T1", "T2")
    request.flag |= 2
    assert await dispatcher.handle(request) is None
    assert list(replicator.read(lambda t: t.broker_datas())) == ["broker-a"]


async def test_an_empty_broker_name_is_refused_with_a_clear_remark(node: Node) -> None:
    """Service validation: names must not be empty."""
    request = register_request(0, MASTER_ADDR, MASTER_HA, "T1", "T2")
    assert request.ext_fields is not None
    request.ext_fields["brokerName"] = ""
    response = await node[2].handle(request)
    assert response is not None
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "brokerName is missing")


def _kind(decided: Registered | Refused) -> Kind | None:
    return decided.kind if isinstance(decided, Registered) else None


async def test_eventual_mode_registers_every_request_whole(node: Node) -> None:
    """Eventual mode has no raft shortcut: each registration, even a repeat, is FULL."""
    registrar = Registrar(node[1])
    request = register_request(0, MASTER_ADDR, MASTER_HA, "T1", "T2")
    kinds = [
        _kind(
            await registrar.register(
                RegisterBrokerRequest.read(request), channel=None, peer_host="127.0.0.1"
            )
        )
        for _ in range(2)
    ]
    assert kinds == [Kind.FULL, Kind.FULL]
    assert node[0].read(lambda t: t.pickup_topic_route("T2")) is not None


async def test_a_topic_name_with_a_lone_surrogate_is_refused_and_nothing_changes(
    node: Node,
) -> None:
    """JSON may carry ``\\ud800`` without its pair: no UTF-8 file, database or page can hold
    such a name, so the whole registration is refused, naming the topic; a real pair (an
    emoji) is Unicode text and registers."""
    replicator, _, dispatcher = node
    request = register_request(0, MASTER_ADDR, MASTER_HA, "T1", "bad?name")
    # The encoder writes what Java would (a "?"); a hostile peer writes the escape.
    assert request.body is not None and request.body.count(b"bad?name") == 2
    request.body = request.body.replace(b"bad?name", b"bad\\ud800name")
    assert request.ext_fields is not None
    request.ext_fields["bodyCrc32"] = str(body_crc32(request.body))
    response = await dispatcher.handle(request)
    assert response is not None and response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark == "topic bad\\ud800name holds a lone surrogate: not Unicode text"
    assert replicator.read(lambda t: t.broker_datas()) == {}
    emoji = await dispatcher.handle(
        register_request(0, MASTER_ADDR, MASTER_HA, "T1", "ok\U0001f600")
    )
    assert emoji is not None and emoji.code == ResponseCode.SUCCESS
    assert replicator.read(lambda t: t.all_topic_list().topic_list) == ["T1", "ok\U0001f600"]


async def test_every_other_name_and_value_with_a_lone_surrogate_is_refused(node: Node) -> None:
    from gateway.services import ServiceError

    _, service, _ = node
    for field in ("brokerName", "clusterName", "haServerAddr"):
        fields = {"brokerName": "broker-a", "clusterName": "C", "haServerAddr": "h:1"}
        fields[field] = "x\udc00"
        try:
            await service.register_broker(
                BrokerRegistration(
                    cluster_name=fields["clusterName"],
                    broker_addr=MASTER_ADDR,
                    broker_name=fields["brokerName"],
                    broker_id=0,
                    ha_server_addr=fields["haServerAddr"],
                )
            )
        except ServiceError as exc:
            assert "lone surrogate" in str(exc) and field in str(exc)
        else:
            raise AssertionError(f"{field} with a lone surrogate was accepted")
    for namespace, key, value in (
        ("n\ud800", "k", "v"),
        ("n", "k\ud800", "v"),
        ("n", "k", "\ud800"),
    ):
        try:
            await service.put_kv(namespace=namespace, key=key, value=value)
        except ServiceError as exc:
            assert "lone surrogate" in str(exc)
        else:
            raise AssertionError(f"KV {namespace!r} {key!r} {value!r} was accepted")
    assert node[0].read(lambda t: t.kv_namespaces()) == {}
