"""The Raft port survives running out of descriptors, over real sockets.

PySyncObj 0.3.17 closed its listening socket at the first failed accept and never
bound it again: a node out of descriptors once could never take a peer's connection
again. Here the port stays bound and pauses; a port that does close anyway is bound
again, shown in the node's status and metrics meanwhile, and its peers reconnect.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import threading
import time
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pysyncobj.pickle as pysyncobj_pickle
import pytest
from pysyncobj.poller import PollPoller

from gateway.metrics import GatewayMetrics
from raftstore.commands import PutKV
from raftstore.raft import RaftReplicator
from raftstore.raft.cipher import RaftCipher
from raftstore.raft.transport import (
    MEMBER_CALLERS_MAX,
    PORT_LISTENING,
    PORT_NOT_LISTENING,
    PORT_PAUSED,
    UNAUTHENTICATED_MAX,
    RaftPortServer,
)
from remoting.limits import RefusalLog
from tests.descriptors import descriptors_left
from tests.raftstore.raft_node import CLUSTER_SECRET, InProcessCluster
from tests.waiting import eventually

PROPOSE_TIMEOUT_S = 3.0
STEP_TIMEOUT_S = 10.0
POLL_S = 0.05


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    nodes = InProcessCluster(tmp_path, propose_timeout_s=PROPOSE_TIMEOUT_S)
    await nodes.start()
    yield nodes
    await nodes.close()


def on_tick_thread(node: RaftReplicator, action: Callable[[], Any]) -> threading.Event:
    """Run ``action`` once on ``node``'s PySyncObj tick thread (the only thread that may
    touch its sockets); the event is set once it ran."""
    done = threading.Event()

    def once() -> None:
        if not done.is_set():
            action()
            done.set()

    assert node._sync is not None
    node._sync.addOnTickCallback(once)
    return done


def transport_of(node: RaftReplicator) -> Any:
    """The node's RaftTransport (a private attribute of PySyncObj's SyncObj)."""
    assert node._sync is not None
    return node._sync._SyncObj__transport


def test_the_raft_port_stays_bound_and_pauses_when_accept_runs_out_of_descriptors() -> None:
    poller = PollPoller()
    accepted: list[Any] = []
    server = RaftPortServer(poller, "127.0.0.1", 0, onNewConnection=accepted.append)
    server.adopt(RefusalLog())
    # Port 0: PySyncObj binds what it is given; the tests read the port back.
    server.bind()
    port = server._TcpServer__socket.getsockname()[1]
    callers = [socket.socket() for _ in range(6)]
    try:
        with descriptors_left(2):
            for caller in callers:
                caller.setblocking(False)
                caller.connect_ex(("127.0.0.1", port))
            for _ in range(5):
                poller.poll(0.05)
            assert server.state == PORT_PAUSED
            assert 1 <= len(accepted) < len(callers)
            assert server.accept_pauses == 1
        late = socket.create_connection(("127.0.0.1", port), timeout=2.0)  # still bound
        callers.append(late)
        deadline_s = time.monotonic() + STEP_TIMEOUT_S
        while len(accepted) < len(callers) and time.monotonic() < deadline_s:
            server.resume_if_due(time.monotonic())
            poller.poll(0.05)
        assert len(accepted) == len(callers)
        assert server.state == PORT_LISTENING
    finally:
        for conn in accepted:
            conn.disconnect()
        for caller in callers:
            caller.close()
        server.unbind()


async def test_a_raft_port_that_stops_listening_is_alarmed_bound_again_and_rejoined(
    cluster: InProcessCluster,
) -> None:
    await cluster.leader()
    # Peers with a greater address dial a smaller one: both others dial this node.
    node = min(cluster.nodes, key=lambda n: n.self_addr)
    host, port = node.self_addr.rsplit(":", 1)
    # Listening on the port (the old connections' TIME_WAIT needs SO_REUSEADDR), so
    # the node cannot bind it again until the blocker closes.
    blocker = socket.socket()
    blocker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def close_the_port() -> None:
        transport = transport_of(node)
        for conn in list(transport._connections.values()):
            conn.disconnect()  # the peers must connect again
        transport._server.unbind()
        blocker.bind((host, int(port)))
        blocker.listen(1)

    try:
        assert on_tick_thread(node, close_the_port).wait(STEP_TIMEOUT_S)
        await eventually(
            lambda: node.status().raft_port == PORT_NOT_LISTENING,
            what="the Raft port closed",
            timeout_s=STEP_TIMEOUT_S,
            interval_s=POLL_S,
        )
        status = node.status()
        assert any(f"Raft port {node.self_addr} is not listening" in a for a in status.alarms)
        body, _ = GatewayMetrics(node).exposition()
        assert b"namesrv_raft_port_listening 0.0" in body
        await asyncio.sleep(1.0)  # several bind attempts and peer redials fail meanwhile
        assert not any(peer.connected for peer in node.status().peers)
    finally:
        blocker.close()

    await eventually(
        lambda: node.status().raft_port == PORT_LISTENING,
        what="the Raft port listening again",
        timeout_s=STEP_TIMEOUT_S,
        interval_s=POLL_S,
    )
    await eventually(
        lambda: all(peer.connected for peer in node.status().peers),
        what="every peer connected",
        timeout_s=STEP_TIMEOUT_S,
        interval_s=POLL_S,
    )
    assert not any("Raft port" in alarm for alarm in node.status().alarms)
    assert transport_of(node).rebinds >= 1
    body, _ = GatewayMetrics(node).exposition()
    assert b"namesrv_raft_port_listening 1.0" in body
    await (await cluster.leader()).propose(PutKV("ns", "after", "rebind"))
    await cluster.converged()
    assert node.read(lambda table: table.kv_get("ns", "after")) == "rebind"


STRANGER_HOST = "127.0.0.2"
"""An address no member has (the members are on 127.0.0.1)."""


def caller(host: str, port: int, source: str) -> socket.socket:
    """A connection to ``host:port`` from the local address ``source``."""
    return socket.create_connection((host, port), timeout=5.0, source_address=(source, 0))


def is_dropped(sock: socket.socket, wait_s: float = 0.5) -> bool:
    """True when the node has closed ``sock`` (within ``wait_s``)."""
    sock.settimeout(wait_s)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def sealed(message: object) -> bytes:
    """``message`` as a member sends it: PySyncObj's framing around our cipher."""
    data = zlib.compress(pysyncobj_pickle.dumps(message), 0)
    token = RaftCipher.from_secret(CLUSTER_SECRET).encrypt_at_time(data, int(time.monotonic()))
    return struct.pack("i", len(token)) + token


async def test_callers_that_never_prove_the_secret_are_bounded_oldest_first(
    cluster: InProcessCluster,
) -> None:
    await cluster.leader()
    node = cluster.nodes[0]
    host, port = node.self_addr.rsplit(":", 1)
    callers = [caller(host, int(port), STRANGER_HOST) for _ in range(40)]
    try:
        await eventually(
            lambda: transport_of(node).callers_waiting <= UNAUTHENTICATED_MAX,
            what="the strangers cut to the cap",
            timeout_s=STEP_TIMEOUT_S,
            interval_s=POLL_S,
        )
        for oldest in callers[: 40 - UNAUTHENTICATED_MAX]:
            assert oldest.recv(1) == b""  # dropped by the node
        await (await cluster.leader()).propose(PutKV("ns", "k", "v"))
        await cluster.converged()
    finally:
        for sock in callers:
            sock.close()


async def test_a_caller_from_a_member_s_address_outlasts_any_number_of_strangers(
    cluster: InProcessCluster,
) -> None:
    """Strangers neither take a member's slots nor push its caller out: a connection
    from the members' address, silent while 64 strangers connect (it was the oldest of
    33 after the first 32, and dropped), is still open and proves the secret."""
    await cluster.leader()
    node = cluster.nodes[0]
    host, port = node.self_addr.rsplit(":", 1)
    transport = transport_of(node)
    assert transport.members_at("127.0.0.1") == len(cluster.nodes) - 1
    assert transport.members_at(STRANGER_HOST) == 0
    member = caller(host, int(port), "127.0.0.1")
    strangers = [caller(host, int(port), STRANGER_HOST) for _ in range(2 * UNAUTHENTICATED_MAX)]
    try:
        await eventually(
            lambda: is_dropped(strangers[UNAUTHENTICATED_MAX - 1], 0.05),
            what="the oldest strangers dropped",
            timeout_s=STEP_TIMEOUT_S,
            interval_s=POLL_S,
        )
        assert not is_dropped(member)

        member.sendall(sealed(os.urandom(32)))  # its random key, as a member's first message
        member.settimeout(STEP_TIMEOUT_S)
        answer = member.recv(4)

        assert len(answer) == 4 and struct.unpack("i", answer)[0] > 0  # the node's key, sealed
        assert not is_dropped(strangers[-1])  # the newest strangers keep their slots
    finally:
        member.close()
        for sock in strangers:
            sock.close()


async def test_callers_from_a_member_s_address_are_bounded_among_themselves(
    cluster: InProcessCluster,
) -> None:
    """A flood from a member's own address (a local cluster's loopback) is bounded too:
    MEMBER_CALLERS_MAX per member there, the oldest dropped first."""
    await cluster.leader()
    node = cluster.nodes[0]
    host, port = node.self_addr.rsplit(":", 1)
    cap = MEMBER_CALLERS_MAX * (len(cluster.nodes) - 1)
    callers = [caller(host, int(port), "127.0.0.1") for _ in range(cap + 3)]
    try:
        for oldest in callers[:3]:
            assert oldest.recv(1) == b""
        assert not any(is_dropped(sock, 0.05) for sock in callers[3:])
        await (await cluster.leader()).propose(PutKV("ns", "k", "members"))
        await cluster.converged()
    finally:
        for sock in callers:
            sock.close()
