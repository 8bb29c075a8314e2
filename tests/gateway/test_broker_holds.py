"""Who may move a broker (gateway/broker_holds.py), against a real in-process gateway.

Each "connection" is its own RemotingClient talking to the gateway's public port over
loopback, so the holds are taken and released by real ``Connection`` objects, and the
route table is the gateway's own (eventual mode: a closed connection unregisters).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.broker_holds import BrokerHolds, HoldRefusal
from gateway.clock import ManualClock
from gateway.options import GatewayOptions
from gateway.server import Gateway
from localcluster.demo import DemoBroker, register_request, topic_table
from node.files import write_secret_file
from raftstore import commands as cmd
from raftstore.config import HEARTBEAT_TIMEOUT_MS_MAX, HEARTBEAT_TIMEOUT_MS_MIN
from raftstore.replicator import LocalReplicator
from raftstore.route_table import RouteTable
from raftstore.tables import BrokerLiveView
from remoting.acl import Credentials
from remoting.acl_policy import (
    LOOPBACK_WHITE_LIST,
    Account,
    AclConfig,
    dump_acl,
    parse_address_pattern as network,
)
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.model import DataVersion, TopicConfigSerializeWrapper
from tests.waiting import eventually

CLUSTER = "DefaultCluster"
MASTER = "127.0.0.1:10911"
HIJACK = "127.0.0.1:1"
NEW_HOME = "127.0.0.1:10951"
ADMIN = Credentials("ops-admin", "ops-admin-secret")
SHARED = Credentials("brokers", "shared-broker-secret")
OWNER_B = Credentials("owner-b", "owner-of-broker-b")
WAIT_S = 5.0
"""A close is seen by the gateway's loop a moment later: how long to wait for it."""
START_MS = 1_700_000_000_000


def broker(name: str, addr: str, broker_id: int = 0) -> DemoBroker:
    host, port = addr.rsplit(":", 1)
    return DemoBroker(CLUSTER, name, broker_id, addr, f"{host}:{int(port) + 1}")


def register(name: str, addr: str, broker_id: int = 0, **extra: str) -> RemotingCommand:
    request = register_request(
        broker(name, addr, broker_id),
        topic_table(["TopicTest", name]),
        DataVersion(timestamp=1, counter=1),
        heartbeat_timeout_ms=30_000,
    )
    request.ext_fields = {**(request.ext_fields or {}), **extra}
    return request


def unregister(name: str, addr: str) -> RemotingCommand:
    fields = {"clusterName": CLUSTER, "brokerAddr": addr, "brokerName": name, "brokerId": "0"}
    return RemotingCommand.request(RequestCode.UNREGISTER_BROKER, fields)


def write_accounts(path: Path) -> Path:
    accounts = (
        Account(ADMIN.access_key, ADMIN.secret_key, admin=True),
        Account(SHARED.access_key, SHARED.secret_key),
        Account(OWNER_B.access_key, OWNER_B.secret_key, broker_names=frozenset({"broker-b"})),
    )
    config = AclConfig(
        {a.access_key: a for a in accounts}, tuple(network(p) for p in LOOPBACK_WHITE_LIST)
    )
    write_secret_file(path, dump_acl(config))
    return path


class Node:
    """The gateway under test and a way to open as many connections as a test needs."""

    def __init__(self, gateway: Gateway, clock: ManualClock) -> None:
        self.gateway = gateway
        self.clock = clock
        self.addr = f"127.0.0.1:{gateway.port}"
        self._clients: list[RemotingClient] = []

    def connection(self, credentials: Credentials | None = None) -> RemotingClient:
        client = RemotingClient(credentials=credentials)
        self._clients.append(client)
        return client

    async def send(self, client: RemotingClient, request: RemotingCommand) -> RemotingCommand:
        return await client.invoke(self.addr, request, WAIT_S)

    def master_of(self, name: str) -> str | None:
        data = self.gateway.replicator.read(lambda table: table.broker_data(name))
        return None if data is None else data.broker_addrs.get(0)

    def addrs_of(self, name: str) -> dict[int, str]:
        data = self.gateway.replicator.read(lambda table: table.broker_data(name))
        return {} if data is None else dict(data.broker_addrs)

    async def close_all(self) -> None:
        for client in self._clients:
            await client.close()


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    clock = ManualClock(START_MS)
    options = GatewayOptions(node_id="n1", port=0, acl_file=write_accounts(tmp_path / "acl.yml"))
    gateway = Gateway(options, clock=clock)
    await gateway.start()
    running = Node(gateway, clock)
    try:
        yield running
    finally:
        await running.close_all()
        await gateway.stop()


@pytest.mark.parametrize("credentials", [None, SHARED], ids=["unsigned", "shared-account"])
async def test_another_connection_cannot_move_a_held_master(
    node: Node, credentials: Credentials | None, caplog: pytest.LogCaptureFixture
) -> None:
    real, attacker = node.connection(), node.connection(credentials)
    assert (await node.send(real, register("broker-a", MASTER))).code == ResponseCode.SUCCESS

    with caplog.at_level(logging.WARNING, logger="gateway.broker_holds"):
        answer = await node.send(attacker, register("broker-a", HIJACK))

    assert answer.code == ResponseCode.NO_PERMISSION
    assert answer.remark is not None
    assert f"that entry is at {MASTER}" in answer.remark
    assert "held by the open connection" in answer.remark and "brokerNames" in answer.remark
    assert node.master_of("broker-a") == MASTER
    assert node.gateway.service.holds.refused["register"] == 1
    assert any("refused a broker change" in r.getMessage() for r in caplog.records)


async def test_registering_the_held_address_under_another_id_is_refused(node: Node) -> None:
    """The table would drop id 0 to give the address id 5: a master demoted is moved too."""
    real, attacker = node.connection(), node.connection()
    await node.send(real, register("broker-a", MASTER))

    answer = await node.send(attacker, register("broker-a", MASTER, broker_id=5))

    assert answer.code == ResponseCode.NO_PERMISSION
    assert answer.remark is not None and "which it would drop" in answer.remark
    assert node.addrs_of("broker-a") == {0: MASTER}


async def test_the_holding_connection_moves_its_own_entry(
    node: Node, caplog: pytest.LogCaptureFixture
) -> None:
    real = node.connection()
    await node.send(real, register("broker-a", MASTER))

    with caplog.at_level(logging.WARNING, logger="gateway.broker_holds"):
        answer = await node.send(real, register("broker-a", NEW_HOME))

    assert answer.code == ResponseCode.SUCCESS
    assert node.master_of("broker-a") == NEW_HOME
    assert f"broker-a's master moved from {MASTER} to {NEW_HOME}" in caplog.text


async def test_once_the_holder_closed_a_new_connection_registers_a_new_address(
    node: Node,
) -> None:
    real = node.connection()
    await node.send(real, register("broker-a", MASTER))

    await real.close()
    await eventually(
        lambda: node.gateway.service.holds.holder("broker-a", 0) is None,
        what="broker-a's hold released",
        timeout_s=WAIT_S,
    )
    answer = await node.send(node.connection(), register("broker-a", NEW_HOME))

    assert answer.code == ResponseCode.SUCCESS
    assert node.master_of("broker-a") == NEW_HOME


async def test_an_expired_entry_is_held_no_longer(node: Node) -> None:
    """A broker that stopped talking but left its connection open loses the hold with
    the entry (the scan expires it after its heartbeat timeout)."""
    silent, successor = node.connection(), node.connection()
    await node.send(silent, register("broker-a", MASTER))

    expired = await node.gateway.service.expire_brokers(START_MS + 60_000)
    answer = await node.send(successor, register("broker-a", NEW_HOME))

    assert [info.broker_addr for info in expired.expired] == [MASTER]
    assert answer.code == ResponseCode.SUCCESS
    assert node.master_of("broker-a") == NEW_HOME


async def test_an_account_bound_to_the_broker_may_move_it(node: Node) -> None:
    real, owner = node.connection(OWNER_B), node.connection(OWNER_B)
    assert (await node.send(real, register("broker-b", MASTER))).code == ResponseCode.SUCCESS

    answer = await node.send(owner, register("broker-b", NEW_HOME))

    assert answer.code == ResponseCode.SUCCESS
    assert node.master_of("broker-b") == NEW_HOME


async def test_a_bound_broker_name_refuses_anyone_else_and_its_account_names_only_it(
    node: Node,
) -> None:
    owner = node.connection(OWNER_B)
    await node.send(owner, register("broker-b", MASTER))

    unsigned = await node.send(node.connection(), register("broker-b", HIJACK))
    shared = await node.send(node.connection(SHARED), register("broker-b", HIJACK))
    elsewhere = await node.send(node.connection(OWNER_B), register("broker-a", HIJACK))

    assert unsigned.code == shared.code == elsewhere.code == ResponseCode.NO_PERMISSION
    assert unsigned.remark is not None and "bound to AccessKey 'owner-b'" in unsigned.remark
    assert elsewhere.remark is not None and "may name only the brokers [broker-b]" in (
        elsewhere.remark
    )
    assert node.master_of("broker-b") == MASTER
    assert node.master_of("broker-a") is None


async def test_another_connection_cannot_unregister_a_held_broker_but_an_admin_may(
    node: Node,
) -> None:
    real = node.connection()
    await node.send(real, register("broker-a", MASTER))

    refused = await node.send(node.connection(), unregister("broker-a", MASTER))
    wrong_name = await node.send(node.connection(), unregister("broker-z", MASTER))
    assert refused.code == wrong_name.code == ResponseCode.NO_PERMISSION
    assert node.master_of("broker-a") == MASTER

    admin = await node.send(node.connection(ADMIN), unregister("broker-a", MASTER))
    assert admin.code == ResponseCode.SUCCESS
    assert node.master_of("broker-a") is None


async def test_a_second_connection_of_the_same_address_neither_unregisters_nor_loses_it(
    node: Node,
) -> None:
    """A broker that reconnected while the node still sees its old connection: its new
    connection's registrations are accepted, its close unregisters nothing, and when
    the old connection closes the new one holds the entry (no gap in the routes)."""
    holds = node.gateway.service.holds
    old, new = node.connection(), node.connection()
    await node.send(old, register("broker-a", MASTER))
    first_holder = holds.holder("broker-a", 0)
    assert (await node.send(new, register("broker-a", MASTER))).code == ResponseCode.SUCCESS

    await old.close()
    await eventually(
        lambda: holds.holder("broker-a", 0) not in (first_holder, None),
        what="the hold passed to the newer connection",
        timeout_s=WAIT_S,
    )
    assert node.master_of("broker-a") == MASTER
    moved = await node.send(node.connection(), register("broker-a", HIJACK))
    assert moved.code == ResponseCode.NO_PERMISSION

    await new.close()
    await eventually(
        lambda: node.master_of("broker-a") is None, what="broker-a gone", timeout_s=WAIT_S
    )


async def test_a_newcomer_closing_leaves_the_holders_entry_alone(node: Node) -> None:
    real, visitor = node.connection(), node.connection()
    await node.send(real, register("broker-a", MASTER))
    await node.send(visitor, register("broker-a", MASTER))

    await visitor.close()
    await asyncio.sleep(0.2)

    assert node.master_of("broker-a") == MASTER
    await real.close()
    await eventually(
        lambda: node.master_of("broker-a") is None, what="broker-a gone", timeout_s=WAIT_S
    )


def test_a_returning_master_of_a_raft_failover_group_is_left_to_the_table() -> None:
    """Raft failover: the table answers a returning old master with a slave id and
    moves nothing, so the holds do not refuse it; without the flag they do."""
    replicator = LocalReplicator("n1", RouteTable())
    holds = BrokerHolds(replicator, failover=True)
    wrapper = TopicConfigSerializeWrapper(topic_config_table=topic_table(["T1", "T2"]))
    replicator.apply_now(
        cmd.RegisterBroker(
            cluster_name=CLUSTER,
            broker_addr=NEW_HOME,
            broker_name="broker-a",
            broker_id=0,
            ha_server_addr="",
            now_ms=START_MS,
            topic_config_wrapper=wrapper,
            enable_raft_failover=True,
        )
    )
    holds.registered(cluster=CLUSTER, name="broker-a", broker_id=0, addr=NEW_HOME, channel="c1")
    returning = register("broker-a", MASTER, enableRaftFailover="true")
    plain = register("broker-a", MASTER)

    def check(request: RemotingCommand) -> HoldRefusal | None:
        return holds.check_register(
            request,
            channel="c2",
            peer_host="127.0.0.1",
            name="broker-a",
            broker_id=0,
            addr=MASTER,
        )

    assert check(returning) is None
    assert check(plain) is not None


# ---------------------------------------------------------------- field by field


def live_entry(node: Node, addr: str = MASTER) -> BrokerLiveView:
    entry = node.gateway.replicator.read(lambda table: table.live_broker(CLUSTER, addr))
    assert entry is not None
    return entry


def touch(code: RequestCode, name: str, addr: str, **extra: str) -> RemotingCommand:
    fields = {"clusterName": CLUSTER, "brokerAddr": addr, "brokerName": name, "brokerId": "0"}
    return RemotingCommand.request(code, {**fields, **extra})


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"haServerAddr": HIJACK}, "haServerAddr"),
        ({"heartbeatTimeoutMillis": "600000"}, "heartbeatTimeoutMillis"),
        ({"enableActingMaster": "true"}, "broker group"),
    ],
    ids=["ha-address", "timeout", "acting-master-flag"],
)
async def test_the_held_address_over_another_connection_changes_nothing_but_liveness(
    node: Node, change: dict[str, str], named: str
) -> None:
    """The hijack of the issue: broker-a re-registered at its own address over a new
    connection, pointing its slaves elsewhere. Only the same registration is accepted."""
    real, other = node.connection(), node.connection()
    await node.send(real, register("broker-a", MASTER))
    before = live_entry(node)
    assert (await node.send(other, register("broker-a", MASTER))).code == ResponseCode.SUCCESS

    answer = await node.send(other, register("broker-a", MASTER, **change))

    assert answer.code == ResponseCode.NO_PERMISSION
    assert answer.remark is not None and named in answer.remark
    assert "held by the open connection" in answer.remark
    after = live_entry(node)
    assert (after.ha_server_addr, after.heartbeat_timeout_ms) == (
        before.ha_server_addr,
        before.heartbeat_timeout_ms,
    )
    slave = await node.send(node.connection(), register("broker-a", "127.0.0.1:10921", 1))
    assert (slave.ext_fields or {}).get("haServerAddr") == before.ha_server_addr


async def test_another_connections_new_topics_are_refused_and_the_holders_accepted(
    node: Node,
) -> None:
    real, other = node.connection(), node.connection()
    await node.send(real, register("broker-a", MASTER))
    more = register_request(
        broker("broker-a", MASTER),
        topic_table(["TopicTest", "broker-a", "Injected"]),
        DataVersion(timestamp=2, counter=2),
        heartbeat_timeout_ms=30_000,
    )

    refused = await node.send(other, more)
    accepted = await node.send(real, more)

    assert refused.code == ResponseCode.NO_PERMISSION
    assert refused.remark is not None and "topics" in refused.remark
    assert accepted.code == ResponseCode.SUCCESS
    routed = node.gateway.replicator.read(lambda table: table.pickup_topic_route("Injected"))
    assert routed is not None


async def test_a_bound_account_changes_its_entry_from_any_connection(node: Node) -> None:
    real, owner = node.connection(OWNER_B), node.connection(OWNER_B)
    await node.send(real, register("broker-b", MASTER))

    answer = await node.send(owner, register("broker-b", MASTER, haServerAddr=NEW_HOME))

    assert answer.code == ResponseCode.SUCCESS
    assert live_entry(node).ha_server_addr == NEW_HOME


@pytest.mark.parametrize("code", [RequestCode.BROKER_HEARTBEAT, RequestCode.QUERY_DATA_VERSION])
async def test_only_the_holder_keeps_a_held_entry_alive_and_reports_its_offsets(
    node: Node, code: RequestCode
) -> None:
    real, stranger = node.connection(), node.connection()
    await node.send(real, register("broker-a", MASTER, maxOffset="100", confirmOffset="90"))
    heard_ms = live_entry(node).last_update_ms
    node.clock.advance(1_000)

    refused = await node.send(stranger, touch(code, "broker-a", MASTER, maxOffset="10000000"))

    assert refused.code == ResponseCode.NO_PERMISSION
    assert refused.remark is not None and "which alone keeps it alive" in refused.remark
    assert (live_entry(node).last_update_ms, live_entry(node).max_offset) == (heard_ms, 100)
    assert (await node.send(real, touch(code, "broker-a", MASTER, maxOffset="150"))).code == 0
    assert (live_entry(node).last_update_ms, live_entry(node).max_offset) == (heard_ms + 1_000, 150)


async def test_a_reconnected_brokers_new_connection_refreshes_liveness_but_no_offsets(
    node: Node,
) -> None:
    """Rule 3's connection (same address, same registration): it keeps the entry alive,
    but what it reports of the offsets is not taken (a forged confirmOffset would win
    the next raft failover)."""
    old, new = node.connection(), node.connection()
    await node.send(old, register("broker-a", MASTER, maxOffset="100", confirmOffset="90"))
    forged = {"maxOffset": "9000000000", "confirmOffset": "9000000000"}
    assert (await node.send(new, register("broker-a", MASTER, **forged))).code == 0
    node.clock.advance(1_000)

    answer = await node.send(new, touch(RequestCode.BROKER_HEARTBEAT, "broker-a", MASTER, **forged))

    assert answer.code == ResponseCode.SUCCESS
    entry = live_entry(node)
    assert (entry.max_offset, entry.confirm_offset) == (100, 90)
    assert entry.last_update_ms == START_MS + 1_000


async def test_a_heartbeat_without_a_broker_name_is_refused_as_upstream_does(node: Node) -> None:
    real = node.connection()
    await node.send(real, register("broker-a", MASTER))
    fields = {"clusterName": CLUSTER, "brokerAddr": MASTER}
    answer = await node.send(real, RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, fields))

    assert answer.code != ResponseCode.SUCCESS
    assert answer.remark is not None and "brokerName" in answer.remark


async def test_a_heartbeat_naming_another_broker_than_the_addresss_is_refused_when_names_are_bound(
    node: Node,
) -> None:
    """broker-b is bound to its account: a heartbeat naming an unbound name cannot keep
    broker-b's address alive around the ACL's brokerNames rule."""
    owner = node.connection(OWNER_B)
    await node.send(owner, register("broker-b", MASTER))
    await owner.close()
    await eventually(
        lambda: node.gateway.service.holds.holder("broker-b", 0) is None,
        what="broker-b's hold released",
        timeout_s=WAIT_S,
    )

    answer = await node.send(
        node.connection(), touch(RequestCode.BROKER_HEARTBEAT, "broker-z", MASTER)
    )

    assert answer.code == ResponseCode.NO_PERMISSION
    assert answer.remark is not None and "not an address of 'broker-z'" in answer.remark


@pytest.mark.parametrize(
    ("asked_ms", "stored_ms"),
    [(2**63 - 1, HEARTBEAT_TIMEOUT_MS_MAX), (1, HEARTBEAT_TIMEOUT_MS_MIN), (30_000, 30_000)],
    ids=["never-expire", "one-ms", "sane"],
)
async def test_a_registered_heartbeat_timeout_is_clamped_to_a_sane_range(
    node: Node, asked_ms: int, stored_ms: int
) -> None:
    request = register("broker-a", MASTER, heartbeatTimeoutMillis=str(asked_ms))

    assert (await node.send(node.connection(), request)).code == ResponseCode.SUCCESS

    assert live_entry(node).heartbeat_timeout_ms == stored_ms
