"""A connection flood against real raft-mode nodes run with few descriptors.

The attack measured on main: thousands of connections, each sending one unsigned
QUERY_DATA_VERSION (a broker-only code, so the read front hands the connection to
the gateway), ran the gateway to its open-file limit; PySyncObj then closed the
Raft port for good, and every failed accept logged a traceback. Here a few
hundred connections reach the limit of two nodes of a three-node cluster:

* one runs with 512 descriptors and the default connection cap: it never runs out,
  accepts pause at the cap, new clients still get route answers, the Raft port
  keeps listening;
* the other's limit is lowered, under the flood, to the descriptors its gateway
  holds (its cap, sized at start, is then above it): the gateway runs out, accepts
  pause, route answers keep coming from the front, the Raft port stays bound and
  accepts again once the limit allows, a peer reconnects to it, and the log holds
  a bounded number of lines.
"""

from __future__ import annotations

import contextlib
import os
import resource
import selectors
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from remoting.blocking import BlockingClient
from remoting.bodies import encode_data_version
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.frame import encode_frame
from remoting.listener import default_connections_max
from remoting.model import DataVersion
from tests.descriptors import descriptors_for, open_files_max
from tests.integration.raft_cluster_harness import (
    RaftGateway,
    RaftGatewayCluster,
    register_frame,
    route_frame,
    topic_of,
    write_until_accepted,
)
from tests.waiting import wait_until
from tools import process_facts

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OPEN_FILES_MAX = 512
"""The capped node's descriptor limit (soft and hard: it cannot raise it); its cap
is then 192 connections, its front's 96."""
FLOOD_CONNECTIONS = 600
SPARE_DESCRIPTORS = 64
FLOOD_SOURCES = 8
"""Flood connections come from 127.0.0.2 to 127.0.0.9, as measured."""
FLOOD_CONNECT_S = 5.0
STEP_TIMEOUT_S = 20.0
POLL_S = 0.1
ROUTE_ANSWER_S = 2.0
LOG_LINES_MAX = 200
RAFT_PAUSED = "raft port: out of descriptors"
"""What a flood may add to a node's log (it added 4.9 MB in 45 s before)."""


def data_version_query() -> bytes:
    """An unsigned QUERY_DATA_VERSION frame, as every flood connection sends it."""
    fields = {
        "clusterName": "FloodCluster",
        "brokerAddr": "127.0.0.1:1",
        "brokerName": "flood",
        "brokerId": "0",
    }
    body = encode_data_version(DataVersion(timestamp=1, counter=1))
    return encode_frame(RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, fields, body))


@contextlib.contextmanager
def flood(port: int, count: int = FLOOD_CONNECTIONS) -> Iterator[list[socket.socket]]:
    """``count`` connections to ``port``, each sending one broker-only request as soon
    as it is connected; all are closed on exit."""
    frame = data_version_query()
    sockets: list[socket.socket] = []
    selector = selectors.DefaultSelector()
    with descriptors_for(count + SPARE_DESCRIPTORS), contextlib.ExitStack() as cleanup:
        cleanup.callback(_close_all, selector, sockets)
        for index in range(count):
            sock = socket.socket()
            sockets.append(sock)
            sock.setblocking(False)
            sock.bind((f"127.0.0.{2 + index % FLOOD_SOURCES}", 0))
            sock.connect_ex(("127.0.0.1", port))
            selector.register(sock, selectors.EVENT_WRITE)
        deadline_s = time.monotonic() + FLOOD_CONNECT_S
        while selector.get_map() and time.monotonic() < deadline_s:
            for key, _ in selector.select(0.1):
                ready = key.fileobj
                assert isinstance(ready, socket.socket)
                selector.unregister(ready)
                if ready.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    with contextlib.suppress(OSError):
                        ready.send(frame)
        yield sockets


def _close_all(selector: selectors.BaseSelector, sockets: list[socket.socket]) -> None:
    selector.close()
    for sock in sockets:
        sock.close()


def open_files(pid: int) -> int:
    """Descriptors process ``pid`` holds now."""
    return process_facts.open_fds(pid)


def first_free_descriptor(pid: int) -> int:
    """The lowest descriptor number process ``pid`` does not use: with its limit set
    there, its next open, accept or socket fails with EMFILE."""
    used = {int(name) for name in os.listdir(f"/proc/{pid}/fd")}
    return next(number for number in range(len(used) + 1) if number not in used)


def route_answered(client: BlockingClient, topic: str) -> bool:
    """True when ``client`` gets the route of ``topic`` within ROUTE_ANSWER_S."""
    return client.invoke(route_frame(topic)).code == ResponseCode.SUCCESS


def log_lines(node: RaftGateway) -> list[str]:
    """The node's log (gateway and front) as lines."""
    return node.log_path.read_text(errors="replace").splitlines()


def node_at(cluster: RaftGatewayCluster, rank: int) -> RaftGateway:
    """The node with the ``rank``-th smallest Raft address."""
    return sorted(cluster.nodes, key=lambda n: n.raft_addr)[rank]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RaftGatewayCluster]:
    """Three raft nodes with read fronts. Of the two with the smallest Raft addresses
    (so that a peer dials them), the second starts with :data:`OPEN_FILES_MAX`
    descriptors; the first is left to lower its gateway's limit once running."""
    nodes = RaftGatewayCluster(
        Path(tmp_path_factory.mktemp("flood")), 3, extra_args=("--read-front",)
    )
    node_at(nodes, 1).preexec = open_files_max(OPEN_FILES_MAX)
    nodes.start()
    try:
        leader = nodes.nodes[nodes.leader()]
        write_until_accepted(leader, register_frame(0), STEP_TIMEOUT_S)
        nodes.converged()
        yield nodes
    finally:
        nodes.stop()


def test_at_its_connection_cap_a_node_keeps_serving_new_clients_and_its_raft_port(
    cluster: RaftGatewayCluster,
) -> None:
    node = node_at(cluster, 1)
    pid = int(node.info["pid"])
    lines_before = len(log_lines(node))
    most = 0
    with flood(node.info["port"]):
        deadline_s = time.monotonic() + 3.0
        while time.monotonic() < deadline_s:  # the flood moves through front and gateway
            most = max(most, open_files(pid))
            time.sleep(0.05)
        with BlockingClient(node.addr, timeout_s=STEP_TIMEOUT_S) as newcomer:
            started_s = time.monotonic()
            assert route_answered(newcomer, topic_of(0))
            assert time.monotonic() - started_s < STEP_TIMEOUT_S / 2
        status = node.node_status()
        assert status["raft_port"] == "listening" and status["raft_accept_pauses"] == 0
    assert most < OPEN_FILES_MAX  # never out of descriptors
    added = log_lines(node)[lines_before:]
    cap = default_connections_max(OPEN_FILES_MAX)
    assert any(f"at the connection cap ({cap - cap // 8} of {cap} open)" in s for s in added)
    assert len(added) < LOG_LINES_MAX and not any("Too many open files" in s for s in added)


def test_out_of_descriptors_a_node_answers_routes_keeps_its_raft_port_and_is_rejoined(
    cluster: RaftGatewayCluster,
) -> None:
    node = node_at(cluster, 0)
    index = cluster.nodes.index(node)
    pid = int(node.info["pid"])
    host, raft_port = node.raft_addr.rsplit(":", 1)
    lines_before = len(log_lines(node))
    with BlockingClient(node.addr, timeout_s=ROUTE_ANSWER_S) as steady:
        assert route_answered(steady, topic_of(0))  # the front keeps a copy
        with flood(node.info["port"]):
            wait_until(
                lambda: open_files(pid) >= FLOOD_CONNECTIONS,
                what="the flood handed over to the gateway",
                timeout_s=STEP_TIMEOUT_S,
                interval_s=POLL_S,
            )
            time.sleep(0.5)  # the hand-overs in flight are done
            soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (first_free_descriptor(pid), hard))
            # An unauthenticated caller on the Raft port meets the exhausted gateway
            # (the log, already open, is where to see it: the status port cannot accept).
            caller = socket.create_connection((host, int(raft_port)), timeout=5.0)
            wait_until(
                lambda: any(RAFT_PAUSED in s for s in log_lines(node)[lines_before:]),
                what="the Raft port paused in the log",
                timeout_s=STEP_TIMEOUT_S,
                interval_s=POLL_S,
            )
            assert route_answered(steady, topic_of(0))
        caller.close()
    wait_until(
        lambda: open_files(pid) < FLOOD_CONNECTIONS // 4,
        what="the flood's descriptors closed",
        timeout_s=STEP_TIMEOUT_S,
        interval_s=POLL_S,
    )
    # Its limit back (a few descriptors above what it holds would do for the port, not
    # for the peers, the status and the writes below).
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
    wait_until(
        lambda: node.node_status()["raft_port"] == "listening",
        what="the Raft port listening again",
        timeout_s=STEP_TIMEOUT_S,
        interval_s=POLL_S,
    )
    assert node.node_status()["raft_accept_pauses"] >= 1

    # Every connection of the node cut: the peers dialling it must come back.
    for name in cluster.proxy.links:
        if str(index) in name.split("->"):
            cluster.proxy.order(link=name, mode="drop")
    wait_until(
        lambda: not any(p["connected"] for p in node.node_status()["peers"]),
        what="every peer cut",
        timeout_s=STEP_TIMEOUT_S,
        interval_s=POLL_S,
    )
    cluster.heal()
    wait_until(
        lambda: all(p["connected"] for p in node.node_status()["peers"]),
        what="every peer back",
        timeout_s=STEP_TIMEOUT_S,
        interval_s=POLL_S,
    )
    leader = cluster.nodes[cluster.leader()]
    write_until_accepted(leader, register_frame(1), STEP_TIMEOUT_S)
    cluster.converged()

    added = log_lines(node)[lines_before:]
    assert len(added) < LOG_LINES_MAX, "\n".join(added[-40:])
