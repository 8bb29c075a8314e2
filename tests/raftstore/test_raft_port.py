"""The Raft port survives running out of descriptors, over real sockets.

PySyncObj 0.3.17 closed its listening socket at the first failed accept and never
bound it again: a node out of descriptors once could never take a peer's connection
again. Here the port stays bound and pauses; a port that does close anyway is bound
again, shown in the node's status and metrics meanwhile, and its peers reconnect.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from pysyncobj.poller import PollPoller

from gateway.metrics import GatewayMetrics
from raftstore.commands import PutKV
from raftstore.raft import RaftReplicator
from raftstore.raft.transport import (
    PORT_LISTENING,
    PORT_NOT_LISTENING,
    PORT_PAUSED,
    UNAUTHENTICATED_MAX,
    RaftPortServer,
)
from remoting.limits import RefusalLog
from tests.descriptors import descriptors_left
from tests.raftstore.raft_node import InProcessCluster

PROPOSE_TIMEOUT_S = 3.0
STEP_TIMEOUT_S = 10.0


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[InProcessCluster]:
    nodes = InProcessCluster(tmp_path, propose_timeout_s=PROPOSE_TIMEOUT_S)
    await nodes.start()
    yield nodes
    await nodes.close()


async def eventually(condition: Callable[[], bool], timeout_s: float = STEP_TIMEOUT_S) -> None:
    """Poll ``condition()`` until it is true."""
    deadline_s = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline_s, "condition never became true"
        await asyncio.sleep(0.05)


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
        await eventually(lambda: node.status().raft_port == PORT_NOT_LISTENING)
        status = node.status()
        assert any(f"Raft port {node.self_addr} is not listening" in a for a in status.alarms)
        body, _ = GatewayMetrics(node).exposition()
        assert b"namesrv_raft_port_listening 0.0" in body
        await asyncio.sleep(1.0)  # several bind attempts and peer redials fail meanwhile
        assert not any(peer.connected for peer in node.status().peers)
    finally:
        blocker.close()

    await eventually(lambda: node.status().raft_port == PORT_LISTENING)
    await eventually(lambda: all(peer.connected for peer in node.status().peers))
    assert not any("Raft port" in alarm for alarm in node.status().alarms)
    assert transport_of(node).rebinds >= 1
    body, _ = GatewayMetrics(node).exposition()
    assert b"namesrv_raft_port_listening 1.0" in body
    await (await cluster.leader()).propose(PutKV("ns", "after", "rebind"))
    await cluster.converged()
    assert node.read(lambda table: table.kv_get("ns", "after")) == "rebind"


async def test_callers_that_never_prove_the_secret_are_bounded_oldest_first(
    cluster: InProcessCluster,
) -> None:
    await cluster.leader()
    node = cluster.nodes[0]
    host, port = node.self_addr.rsplit(":", 1)
    callers = [socket.create_connection((host, int(port)), timeout=5.0) for _ in range(40)]
    try:
        await eventually(lambda: len(transport_of(node)._accepted_at) <= UNAUTHENTICATED_MAX)
        for oldest in callers[: 40 - UNAUTHENTICATED_MAX]:
            assert oldest.recv(1) == b""  # dropped by the node
        await (await cluster.leader()).propose(PutKV("ns", "k", "v"))
        await cluster.converged()
    finally:
        for caller in callers:
            caller.close()
