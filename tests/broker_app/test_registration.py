"""REGISTER_BROKER / QUERY_DATA_VERSION / UNREGISTER_BROKER frames as a NameServer receives them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker_app.metadata import BrokerMetadata, MetadataSnapshot, default_topics
from broker_app.registration import BrokerIdentity, Registrar, first_master, split_table
from remoting.client import RemotingClient
from remoting.codes import CURRENT_VERSION, RequestCode
from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from tests.broker_app.support import FakeNameServer

MASTER = BrokerIdentity("DefaultCluster", "broker-a", 0, "127.0.0.1:10911", "127.0.0.1:10912")
SLAVE = BrokerIdentity("DefaultCluster", "broker-a", 1, "127.0.0.1:10921", "127.0.0.1:10922")


@pytest.fixture
def namesrvs() -> Iterator[list[FakeNameServer]]:
    servers = [FakeNameServer().start(), FakeNameServer().start()]
    yield servers
    for server in servers:
        server.stop()


def registrar_for(
    identity: BrokerIdentity,
    metadata: BrokerMetadata,
    servers: list[FakeNameServer],
    client: RemotingClient,
    compress_over_bytes: int = 64 * 1024,
) -> Registrar:
    return Registrar(
        client,
        tuple(s.addr for s in servers),
        lambda: identity,
        metadata.topic_wrapper,
        timeout_s=5.0,
        compress_over_bytes=compress_over_bytes,
    )


def fresh_metadata() -> BrokerMetadata:
    topics = default_topics("DefaultCluster", "broker-a", auto_create=True, queue_nums=4)
    return BrokerMetadata(MetadataSnapshot(topics=topics, topic_version=DataVersion(0, 5, 1)))


async def test_a_forced_round_registers_with_every_namesrv_with_a_valid_crc(
    namesrvs: list[FakeNameServer],
) -> None:
    client = RemotingClient()
    metadata = fresh_metadata()
    try:
        results = await registrar_for(MASTER, metadata, namesrvs, client).register_all(force=True)
    finally:
        await client.close()
    assert all(r.ok for r in results) and len(results) == 2
    for server in namesrvs:
        [frame] = server.of(RequestCode.REGISTER_BROKER)
        assert frame.crc_ok and frame.ext["bodyCrc32"] != "0"
        assert frame.ext["compressed"] == "false"
        assert frame.version == CURRENT_VERSION
        assert frame.ext["haServerAddr"] == MASTER.ha_server_addr
        assert frame.register_body is not None
        wrapper = frame.register_body.topic_config_wrapper
        assert wrapper.data_version == DataVersion(0, 5, 1)
        assert set(wrapper.topic_config_table) == set(metadata.snapshot.topics)


async def test_a_large_topic_table_goes_compressed_and_decodes(
    namesrvs: list[FakeNameServer],
) -> None:
    metadata = fresh_metadata()
    for index in range(300):
        metadata.upsert_topic(TopicConfig(f"Topic{index:04d}", 8, 8), 1000 + index)
    client = RemotingClient()
    try:
        registrar = registrar_for(MASTER, metadata, namesrvs, client, compress_over_bytes=4096)
        await registrar.register_all(force=True)
    finally:
        await client.close()
    [frame] = namesrvs[0].of(RequestCode.REGISTER_BROKER)
    assert frame.ext["compressed"] == "true" and frame.crc_ok
    assert frame.register_body is not None
    table = frame.register_body.topic_config_wrapper.topic_config_table
    assert table["Topic0299"].read_queue_nums == 8
    assert len(table) == len(metadata.snapshot.topics)
    assert frame.body is not None and len(frame.body) < 4096


async def test_an_unchanged_periodic_round_asks_query_data_version_and_skips(
    namesrvs: list[FakeNameServer],
) -> None:
    client = RemotingClient()
    metadata = fresh_metadata()
    registrar = registrar_for(MASTER, metadata, namesrvs, client)
    try:
        await registrar.register_all(force=True)
        skipped = await registrar.register_all(force=False)
        metadata.upsert_topic(TopicConfig("NewTopic", 4, 4), 99_000)
        registered = await registrar.register_all(force=False)
    finally:
        await client.close()
    assert skipped == [] and registrar.skipped_rounds == 1
    assert len(registered) == 2
    for server in namesrvs:
        assert server.codes() == [
            RequestCode.REGISTER_BROKER,
            RequestCode.QUERY_DATA_VERSION,
            RequestCode.QUERY_DATA_VERSION,
            RequestCode.REGISTER_BROKER,
        ]
        query = server.of(RequestCode.QUERY_DATA_VERSION)[0]
        assert query.ext["brokerName"] == "broker-a" and query.ext["brokerId"] == "0"


async def test_an_unreachable_namesrv_counts_as_changed(namesrvs: list[FakeNameServer]) -> None:
    client = RemotingClient(connect_timeout_s=1.0)
    metadata = fresh_metadata()
    registrar = Registrar(
        client,
        (namesrvs[0].addr, "127.0.0.1:1"),
        lambda: MASTER,
        metadata.topic_wrapper,
        timeout_s=2.0,
        compress_over_bytes=65536,
    )
    try:
        await registrar.register_all(force=True)
        results = await registrar.register_all(force=False)
    finally:
        await client.close()
    assert [r.ok for r in results] == [True, False]


async def test_a_slave_learns_its_master_from_the_register_answer(
    namesrvs: list[FakeNameServer],
) -> None:
    client = RemotingClient()
    try:
        await registrar_for(MASTER, fresh_metadata(), namesrvs, client).register_all(force=True)
        results = await registrar_for(SLAVE, fresh_metadata(), namesrvs, client).register_all(
            force=True
        )
        await registrar_for(MASTER, fresh_metadata(), namesrvs, client).unregister_all()
    finally:
        await client.close()
    found = first_master(results)
    assert found is not None
    assert (found.master_addr, found.ha_server_addr) == (MASTER.broker_addr, MASTER.ha_server_addr)
    [unregister] = namesrvs[1].of(RequestCode.UNREGISTER_BROKER)
    assert unregister.ext == MASTER.fields()


def test_an_incremental_wrapper_holds_only_the_created_topic() -> None:
    metadata = fresh_metadata()
    metadata.upsert_topic(TopicConfig("Only", 2, 2), 7)
    wrapper = metadata.topic_wrapper(only="Only")
    assert isinstance(wrapper, TopicConfigSerializeWrapper)
    assert list(wrapper.topic_config_table) == ["Only"]
    assert wrapper.data_version.counter == 2


def test_a_table_past_the_split_size_goes_in_numbered_parts_of_one_version() -> None:
    """enableSplitRegistration: ceil(n / size) parts, every one with the table's
    DataVersion, the last carrying the static-topic mappings; a table of at most
    ``size`` topics (or no size) goes whole, without the part fields."""
    version = DataVersion(1, 2, 3)
    wrapper = TopicConfigSerializeWrapper(
        data_version=version,
        topic_config_table={f"T{i}": TopicConfig(f"T{i}", 4, 4) for i in range(7)},
        topic_queue_mapping_detail_map={"T1": {"bname": "broker-a"}},
    )
    parts = split_table(wrapper, 3)
    assert [len(p.topic_config_table) for p, _ in parts] == [3, 3, 1]
    assert [f["splitRegistrationPart"] for _, f in parts] == ["0", "1", "2"]
    assert {f["splitRegistrationParts"] for _, f in parts} == {"3"}
    assert {p.data_version for p, _ in parts} == {version}
    assert [bool(p.topic_queue_mapping_detail_map) for p, _ in parts] == [False, False, True]
    merged = {name for p, _ in parts for name in p.topic_config_table}
    assert merged == set(wrapper.topic_config_table)
    assert split_table(wrapper, 7) == [(wrapper, {})]
    assert split_table(wrapper, None) == [(wrapper, {})]
