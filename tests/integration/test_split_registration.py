"""Registrations past 16 MiB: a broker with 50,000 topics registers in parts
(``enableSplitRegistration``), and the NameServer registers the merged table at the
last part, in eventual mode (one gateway) and in raft mode (three, one Raft entry).

The broker side is broker_app's own Registrar; the NameServers are real gateway
processes with ``deleteTopicWithBrokerRegistration``, the setting under which
registering the parts one by one, as an upstream NameServer does, would make each
part delete the topics of the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator

import pytest

from broker_app.registration import (
    BrokerIdentity,
    Registrar,
    build_register_request,
    split_table,
)
from remoting.blocking import BlockingClient
from remoting.bodies import decode_topic_list
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.frame import FRAME_BYTES_MAX
from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from tests.integration.gateway_harness import GatewayProcess, config_args, route_request
from tests.integration.raft_cluster_harness import running_cluster
from tests.waiting import eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SUCCESS = ResponseCode.SUCCESS
TOPIC_NOT_EXIST = ResponseCode.TOPIC_NOT_EXIST

TOPICS = 50_000
SPLIT_SIZE = 800  # upstream's default splitRegistrationSize
NAME_LENGTH = 110  # long names: the whole table is past one 16 MiB frame
NEVER_COMPRESS = 1 << 40
RETRY_S = 60.0
IDENTITY = BrokerIdentity("SplitCluster", "broker-big", 0, "127.0.0.1:30911", "127.0.0.1:30912")


def topic_name(index: int) -> str:
    return f"SplitTopic{index:06d}".ljust(NAME_LENGTH, "x")


def table(names: list[str], counter: int) -> TopicConfigSerializeWrapper:
    return TopicConfigSerializeWrapper(
        data_version=DataVersion(timestamp=1_700_000_000_000 + counter, counter=counter),
        topic_config_table={name: TopicConfig(name, 8, 8) for name in names},
    )


@pytest.fixture(scope="module", params=["eventual", "raft"])
def namesrvs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[str]]:
    """The public addresses of one eventual gateway or of a three-node raft cluster,
    each dropping the topics a broker stops listing."""
    root = tmp_path_factory.mktemp(f"split-{request.param}")
    args = config_args(root, deleteTopicWithBrokerRegistration="true")
    if request.param == "eventual":
        gateway = GatewayProcess(
            "n1",
            root / "db.sqlite3",
            root / "ready.json",
            root / "gateway.log",
            extra_args=args,
        ).start()
        try:
            yield [gateway.addr]
        finally:
            gateway.terminate()
        return
    with running_cluster(root, args) as cluster:
        yield [node.addr for node in cluster.nodes]


def topic_list(addr: str) -> set[str]:
    with BlockingClient(addr, timeout_s=30.0) as client:
        response = client.invoke(
            RemotingCommand.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        )
    assert response.code == ResponseCode.SUCCESS and response.body is not None
    return set(decode_topic_list(response.body).topic_list)


def route_code(addr: str, topic: str) -> int:
    with BlockingClient(addr, timeout_s=10.0) as client:
        return client.invoke(route_request(topic, 479)).code


async def until_accepted(attempt: Callable[[], Awaitable[bool]]) -> None:
    """Repeat ``attempt`` (a broker's registration round) until it is accepted, as a
    broker's next round does. On a loaded machine a raft node may refuse a round with
    "no raft quorum" while the leader's tick thread applies three 50,000-topic entries
    (docs/BENCHMARKS.md, "split registrations"); any other refusal fails the test."""
    await eventually(
        attempt, what="the registration round accepted", timeout_s=RETRY_S, interval_s=1.0
    )


def test_a_50000_topic_broker_registers_in_parts_and_loses_exactly_a_removed_topic(
    namesrvs: list[str],
) -> None:
    asyncio.run(_register_remove_unregister(namesrvs))


async def _register_remove_unregister(addrs: list[str]) -> None:
    """One RemotingClient throughout: a NameServer drops the brokers registered over
    a connection when it closes (upstream's onChannelDestroy)."""
    names = [topic_name(i) for i in range(TOPICS)]
    whole = table(names, 1)
    unsplit = build_register_request(IDENTITY, whole, compress_over_bytes=NEVER_COMPRESS)
    assert unsplit.body is not None and len(unsplit.body) > FRAME_BYTES_MAX

    parts = split_table(whole, SPLIT_SIZE)
    assert len(parts) == TOPICS // SPLIT_SIZE + 1
    requests = [
        build_register_request(IDENTITY, part, compress_over_bytes=NEVER_COMPRESS, extra_fields=f)
        for part, f in parts
    ]
    client = RemotingClient()
    current = [whole]
    registrar = Registrar(
        client,
        tuple(addrs),
        lambda: IDENTITY,
        lambda: current[0],
        timeout_s=30.0,
        compress_over_bytes=NEVER_COMPRESS,
        split_size=SPLIT_SIZE,
    )
    try:
        # Every part but the last is held: no reader sees any of the table yet.
        for addr in addrs:
            for request in requests[:-1]:
                answer = await client.invoke(addr, request, 30.0)
                assert answer.code == ResponseCode.SUCCESS, answer.remark
                assert answer.remark is not None and "held" in answer.remark
            assert await asyncio.to_thread(route_code, addr, names[0]) == TOPIC_NOT_EXIST
            assert await asyncio.to_thread(topic_list, addr) == set()
        for addr in addrs:

            async def last_part(addr: str = addr) -> bool:
                answer = await client.invoke(addr, requests[-1], 30.0)
                if answer.code == SUCCESS:
                    return True
                assert "no raft quorum" in (answer.remark or ""), answer.remark
                # The table went with its refused last part: the broker's next round.
                for request in requests[:-1]:
                    assert (await client.invoke(addr, request, 30.0)).code == SUCCESS
                return False

            await until_accepted(last_part)
        for addr in addrs:
            assert await asyncio.to_thread(topic_list, addr) == set(names)
            assert await asyncio.to_thread(route_code, addr, names[0]) == SUCCESS
            assert await asyncio.to_thread(route_code, addr, names[-1]) == SUCCESS

        # The broker drops one topic (a new DataVersion) and its next round, split by
        # broker_app, registers the merged table: exactly that topic goes.
        gone = names[TOPICS // 2]
        current[0] = table([n for n in names if n != gone], 2)

        async def round_accepted() -> bool:
            results = await registrar.register_all(force=True)
            refused = [r for r in results if not r.ok]
            assert all("no raft quorum" in (r.error or "") for r in refused), refused
            return not refused

        await until_accepted(round_accepted)
        for addr in addrs:
            assert await asyncio.to_thread(topic_list, addr) == set(names) - {gone}
            assert await asyncio.to_thread(route_code, addr, gone) == TOPIC_NOT_EXIST

        await registrar.unregister_all()
        for addr in addrs:
            assert await asyncio.to_thread(topic_list, addr) == set()
            assert await asyncio.to_thread(route_code, addr, names[0]) == TOPIC_NOT_EXIST
    finally:
        await client.close()


def test_parts_out_of_order_or_of_another_version_are_refused_and_nothing_applies(
    namesrvs: list[str],
) -> None:
    names = [topic_name(TOPICS + i) for i in range(3 * 10)]  # not the other test's names
    parts = split_table(table(names, 5), 10)
    other = split_table(table(names, 6), 10)
    requests = [
        build_register_request(IDENTITY, part, compress_over_bytes=NEVER_COMPRESS, extra_fields=f)
        for part, f in parts
    ]
    stray = build_register_request(
        IDENTITY, other[1][0], compress_over_bytes=NEVER_COMPRESS, extra_fields=other[1][1]
    )
    addr = namesrvs[0]
    with BlockingClient(addr, timeout_s=30.0) as client:
        skipped = client.invoke(requests[1])
        assert skipped.code == ResponseCode.SYSTEM_ERROR
        assert skipped.remark is not None and "out of order" in skipped.remark
        assert client.invoke(requests[0]).code == ResponseCode.SUCCESS
        mixed = client.invoke(stray)
        assert mixed.code == ResponseCode.SYSTEM_ERROR
        assert mixed.remark is not None and "another DataVersion" in mixed.remark
        # The table was dropped with the stray part: its last part now belongs to nothing.
        orphan = client.invoke(requests[2])
        assert orphan.code == ResponseCode.SYSTEM_ERROR
        bad = RemotingCommand.request(
            RequestCode.REGISTER_BROKER,
            {**(requests[0].ext_fields or {}), "splitRegistrationPart": "3"},
            requests[0].body,
        )
        nonsense = client.invoke(bad)
        assert nonsense.code == ResponseCode.SYSTEM_ERROR
        assert nonsense.remark is not None and "numbered from 0" in nonsense.remark
    assert not topic_list(addr) & set(names)
    assert route_code(addr, names[0]) == ResponseCode.TOPIC_NOT_EXIST
