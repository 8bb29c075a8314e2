"""A live broker cannot be moved by someone else (docs/SECURITY.md, "Who may move a
broker"), over real sockets against real gateway processes in both modes.

The attack: a local process sends REGISTER_BROKER naming broker-a, brokerId 0, address
127.0.0.1:1, unsigned or signed with an account that is not broker-a's, while the real
broker-a is connected. Before the rule every node then routed broker-a's master to
127.0.0.1:1. Now the request is answered 16, the route stays, and the refusal is
logged; the real broker still moves itself, and an account bound to a broker name
moves that broker from any connection.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from localcluster.demo import DemoBroker, register_request, topic_table
from node.files import write_secret_file
from remoting.acl import Credentials
from remoting.acl_policy import (
    LOOPBACK_WHITE_LIST,
    Account,
    AclConfig,
    dump_acl,
    parse_address_pattern as network,
)
from remoting.blocking import BlockingClient
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.model import DataVersion
from tests.integration.cluster_fixtures import query_route
from tests.integration.gateway_harness import GatewayProcess
from tests.integration.raft_cluster_harness import RaftGateway, RaftGatewayCluster
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

CLUSTER = "DefaultCluster"
HIJACK = "127.0.0.1:1"
SHARED = Credentials("namesrv-broker", "shared-broker-secret")
OWNER_B = Credentials("broker-b-account", "broker-b-secret-key")
ADMIN = Credentials("namesrv-admin", "admin-secret-key")
ATTACKERS: dict[str, Credentials | None] = {
    "unsigned": None,
    "shared-account": SHARED,
    "broker-b-account": OWNER_B,
}
WAIT_S = 10.0


def write_accounts(folder: Path) -> Path:
    """Admin, the shared broker account and broker-b's own; loopback white-listed."""
    accounts = (
        Account(ADMIN.access_key, ADMIN.secret_key, admin=True),
        Account(SHARED.access_key, SHARED.secret_key),
        Account(OWNER_B.access_key, OWNER_B.secret_key, broker_names=frozenset({"broker-b"})),
    )
    config = AclConfig(
        {a.access_key: a for a in accounts}, tuple(network(p) for p in LOOPBACK_WHITE_LIST)
    )
    path = folder / "plain_acl.yml"
    write_secret_file(path, dump_acl(config))
    return path


def register(name: str, addr: str) -> RemotingCommand:
    """REGISTER_BROKER of ``name`` id 0 at ``addr``, announcing TopicTest and its name."""
    host, port = addr.rsplit(":", 1)
    broker = DemoBroker(CLUSTER, name, 0, addr, f"{host}:{int(port) + 1}")
    return register_request(
        broker, topic_table(["TopicTest", name]), DataVersion(timestamp=1, counter=1)
    )


def master_at(addr: str, name: str) -> str | None:
    """The master address of ``name`` in the node's route of the topic named after it."""
    code, route = query_route(addr, name)
    if code != ResponseCode.SUCCESS or route is None:
        return None
    for data in route.broker_datas:
        if data.broker_name == name:
            return data.broker_addrs.get(0)
    return None


def send(addr: str, request: RemotingCommand, credentials: Credentials | None) -> RemotingCommand:
    """One request on a connection of its own (closed afterwards)."""
    with BlockingClient(addr, timeout_s=WAIT_S, credentials=credentials) as client:
        return client.invoke(request)


# ---------------------------------------------------------------- eventual mode


class EventualNode:
    """One eventual gateway behind its read front (brokers' connections handed over),
    with the real broker-a connected."""

    def __init__(self, folder: Path) -> None:
        self.gateway = GatewayProcess(
            "n1",
            folder / "db.sqlite3",
            folder / "ready.json",
            folder / "gateway.log",
            with_test_acl=False,
            extra_args=("--acl-file", str(write_accounts(folder)), "--read-front"),
        ).start()
        self.addr = self.gateway.addr
        self.broker_a = BlockingClient(self.addr, timeout_s=WAIT_S)
        assert self.broker_a.invoke(register("broker-a", "127.0.0.1:10911")).code == 0

    def log(self) -> str:
        return self.gateway.log_path.read_text(encoding="utf-8", errors="replace")

    def close(self) -> None:
        self.broker_a.close()
        self.gateway.terminate()


@pytest.fixture(scope="module")
def eventual(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EventualNode]:
    node = EventualNode(tmp_path_factory.mktemp("hijack-eventual"))
    try:
        yield node
    finally:
        node.close()


@pytest.mark.parametrize("attacker", sorted(ATTACKERS))
def test_eventual_a_hijack_of_a_live_master_is_refused_and_the_route_kept(
    eventual: EventualNode, attacker: str
) -> None:
    answer = send(eventual.addr, register("broker-a", HIJACK), ATTACKERS[attacker])

    assert answer.code == ResponseCode.NO_PERMISSION, answer
    assert answer.remark is not None
    assert "held by the open connection" in answer.remark or "may name only" in answer.remark
    assert master_at(eventual.addr, "broker-a") == "127.0.0.1:10911"


def test_eventual_a_refused_move_is_in_the_gateway_log(eventual: EventualNode) -> None:
    send(eventual.addr, register("broker-a", HIJACK), None)

    wait_until(
        lambda: "refused a broker change" in eventual.log(),
        what="the refusal in the gateway log",
        timeout_s=WAIT_S,
    )
    assert f"REGISTER_BROKER of broker-a id 0 at {HIJACK} refused" in eventual.log()


def test_eventual_the_holder_registers_a_new_address_after_closing(
    eventual: EventualNode,
) -> None:
    with BlockingClient(eventual.addr, timeout_s=WAIT_S) as broker_c:
        assert broker_c.invoke(register("broker-c", "127.0.0.1:10931")).code == 0
    # Closing unregisters it (eventual mode); its restart on another port registers.
    wait_until(
        lambda: master_at(eventual.addr, "broker-c") is None,
        what="broker-c unregistered",
        timeout_s=WAIT_S,
    )

    with BlockingClient(eventual.addr, timeout_s=WAIT_S) as restarted:
        assert restarted.invoke(register("broker-c", "127.0.0.1:10971")).code == 0
        assert master_at(eventual.addr, "broker-c") == "127.0.0.1:10971"


def test_eventual_a_per_broker_account_moves_its_own_broker_and_the_move_is_logged(
    eventual: EventualNode,
) -> None:
    with (
        BlockingClient(eventual.addr, timeout_s=WAIT_S, credentials=OWNER_B) as broker_b,
        BlockingClient(eventual.addr, timeout_s=WAIT_S, credentials=OWNER_B) as mover,
    ):
        assert broker_b.invoke(register("broker-b", "127.0.0.1:10941")).code == 0

        moved = mover.invoke(register("broker-b", "127.0.0.1:10981"))

        assert moved.code == ResponseCode.SUCCESS, moved
        assert master_at(eventual.addr, "broker-b") == "127.0.0.1:10981"
    line = "broker-b's master moved from 127.0.0.1:10941 to 127.0.0.1:10981"
    wait_until(lambda: line in eventual.log(), what="the move in the gateway log", timeout_s=WAIT_S)


# ---------------------------------------------------------------- raft mode


class RaftNodes:
    """Three raft gateways; the real broker-a is connected to every one of them."""

    def __init__(self, folder: Path) -> None:
        self.cluster = RaftGatewayCluster(
            folder, extra_args=("--acl-file", str(write_accounts(folder)))
        )
        self.cluster.start()
        self.cluster.leader()
        self.nodes: list[RaftGateway] = self.cluster.nodes
        self.broker_a = [BlockingClient(n.addr, timeout_s=WAIT_S) for n in self.nodes]
        for client in self.broker_a:
            assert client.invoke(register("broker-a", "127.0.0.1:10911")).code == 0

    def close(self) -> None:
        for client in self.broker_a:
            client.close()
        self.cluster.stop()


@pytest.fixture(scope="module")
def raft(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RaftNodes]:
    nodes = RaftNodes(tmp_path_factory.mktemp("hijack-raft"))
    try:
        yield nodes
    finally:
        nodes.close()


@pytest.mark.slow
@pytest.mark.parametrize("attacker", sorted(ATTACKERS))
def test_raft_every_node_refuses_the_hijack_and_keeps_the_route(
    raft: RaftNodes, attacker: str
) -> None:
    answers = [
        send(node.addr, register("broker-a", HIJACK), ATTACKERS[attacker]) for node in raft.nodes
    ]

    assert [a.code for a in answers] == [ResponseCode.NO_PERMISSION] * len(raft.nodes)
    for answer in answers:
        assert answer.remark is not None
        assert "held by the open connection" in answer.remark or "may name only" in answer.remark
    raft.cluster.converged()
    assert [master_at(n.addr, "broker-a") for n in raft.nodes] == ["127.0.0.1:10911"] * 3


@pytest.mark.slow
def test_raft_a_bound_broker_name_is_safe_even_where_its_broker_is_not_connected(
    raft: RaftNodes,
) -> None:
    """broker-b talks to n1 only. n2 and n3 hold no connection of it, yet refuse the
    hijack (the name is bound to broker-b's account); that account moves it from n3."""
    n1, n2, n3 = raft.nodes
    with BlockingClient(n1.addr, timeout_s=WAIT_S, credentials=OWNER_B) as broker_b:
        assert broker_b.invoke(register("broker-b", "127.0.0.1:10941")).code == 0
        for node in (n2, n3):
            for credentials in (None, SHARED):
                refused = send(node.addr, register("broker-b", HIJACK), credentials)
                assert refused.code == ResponseCode.NO_PERMISSION, refused

        moved = send(n3.addr, register("broker-b", "127.0.0.1:10981"), OWNER_B)

    assert moved.code == ResponseCode.SUCCESS, moved
    raft.cluster.converged()
    assert [master_at(n.addr, "broker-b") for n in raft.nodes] == ["127.0.0.1:10981"] * 3
    line = "broker-b's master moved from 127.0.0.1:10941 to 127.0.0.1:10981"
    wait_until(
        lambda: all(line in n.log_path.read_text() for n in raft.nodes),
        what="the move in every node's log",
        timeout_s=WAIT_S,
    )


# ---------------------------------------------------------------- the file's mode


def test_a_gateway_refuses_an_accounts_file_others_may_read_with_one_clear_line(
    tmp_path: Path,
) -> None:
    acl_file = write_accounts(tmp_path)
    acl_file.chmod(0o644)
    process = GatewayProcess(
        "n1",
        tmp_path / "db.sqlite3",
        tmp_path / "ready.json",
        tmp_path / "gateway.log",
        with_test_acl=False,
        extra_args=("--acl-file", str(acl_file)),
    )

    with pytest.raises(RuntimeError, match="gateway did not start") as caught:
        process.start()

    lines = [line for line in str(caught.value).splitlines() if "plain_acl.yml" in line]
    assert len(lines) == 1
    assert "open to group or others (mode 0644)" in lines[0] and "chmod 600" in lines[0]
