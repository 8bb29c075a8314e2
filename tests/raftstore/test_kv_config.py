"""KV config rules; ports of upstream ``kvconfig/KVConfigManagerTest`` (2 tests) and
``KVConfigSerializeWrapperTest`` (1 test, here the KV part of our snapshot codec)."""

from __future__ import annotations

from raftstore.commands import DeleteKV, PutKV, RegisterBroker
from raftstore.config import NamesrvConfig
from raftstore.results import RegisterBrokerOutcome
from raftstore.route_table import RouteTable
from remoting.model import NAMESPACE_ORDER_TOPIC_CONFIG, KVTable
from tests.raftstore.cast import ADDR_A0, BROKER_A, NOW_MS, register, topics

NS = NAMESPACE_ORDER_TOPIC_CONFIG


def test_put_kv_config_creates_the_namespace(table: RouteTable) -> None:
    """KVConfigManagerTest.testPutKVConfig."""
    table.apply(PutKV(NS, "UnitTest", "test"))
    assert table.kv_list(NS) is not None
    assert table.kv_get(NS, "UnitTest") == "test"


def test_delete_kv_config_of_a_never_created_namespace_keeps_it_absent(table: RouteTable) -> None:
    """KVConfigManagerTest.testDeleteKVConfig."""
    result = table.apply(DeleteKV(NS, "UnitTest"))
    assert result.changes.empty
    assert table.kv_list(NS) is None
    assert table.kv_get(NS, "UnitTest") is None


def test_kv_namespaces_survive_a_snapshot_round_trip(table: RouteTable) -> None:
    """KVConfigSerializeWrapperTest.testEncodeAndDecode, on our own codec."""
    values = {
        "broker-name": "default-broker",
        "topic-name": "default-topic",
        "cid": "default-consumer-name",
    }
    for key, value in values.items():
        table.apply(PutKV(NS, key, value))
    restored = RouteTable.restore(table.snapshot())
    assert restored.kv_namespaces() == {NS: dict(sorted(values.items()))}


def test_deleting_the_last_key_keeps_an_empty_namespace(table: RouteTable) -> None:
    table.apply(PutKV("ns", "k", "v"))
    result = table.apply(DeleteKV("ns", "k"))
    assert result.changes.kv == frozenset({("ns", "k")})
    assert table.kv_list("ns") == KVTable(table={})


def test_putting_the_same_value_again_changes_nothing(table: RouteTable) -> None:
    first = table.apply(PutKV("ns", "k", "v"))
    again = table.apply(PutKV("ns", "k", "v"))
    assert first.applied_version == 1 and again.applied_version == 1
    assert again.changes.empty


def test_order_topic_config_is_in_the_route_only_when_order_messages_are_enabled() -> None:
    for enabled in (False, True):
        table = RouteTable(NamesrvConfig(order_message_enable=enabled))
        register(table, addr=ADDR_A0, name=BROKER_A, broker_id=0, topic_table=topics("T", "U"))
        table.apply(PutKV(NS, "T", "broker-a:8"))
        route = table.pickup_topic_route("T")
        assert route is not None
        assert route.order_topic_conf == ("broker-a:8" if enabled else None)


def test_register_broker_returns_the_order_topic_namespace_when_configured() -> None:
    for returned in (False, True):
        table = RouteTable(NamesrvConfig(return_order_topic_config_to_broker=returned))
        table.apply(PutKV(NS, "T", "broker-a:8"))
        result = table.apply(
            RegisterBroker("c", ADDR_A0, BROKER_A, 0, "", NOW_MS, enable_acting_master=False)
        )
        expected = KVTable(table={"T": "broker-a:8"}) if returned else None
        assert result.outcome == RegisterBrokerOutcome(order_topic_config=expected)
