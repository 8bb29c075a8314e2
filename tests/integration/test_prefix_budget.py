"""Connections per /24 against a launched node: a flood from many addresses of one
subnet stops at the prefix's cap, and a broker from elsewhere still registers.

The node is a real ``run_gateway --read-front`` (the front owns the public port), run
with small caps so the flood is short: 8 connections per address
(``--connections-per-address-max``) and 64 per prefix
(``NAMESRV_CONNECTIONS_PER_PREFIX_MAX``, which the front inherits). Linux routes all
of 127.0.0.0/8 to ``lo``, so the test connects from as many addresses as it likes.
On loopback every /24 is a prefix of its own, and the loopback network as a whole
holds at most two prefixes' worth (remoting/limits.py): a local flood over many /24s
stops there too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import select
import socket
import time
from collections.abc import Iterator

import pytest

from localcluster.demo import DemoBroker, register_request, topic_table
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.frame import FrameDecoder, encode_frame
from remoting.limits import CONNECTIONS_PER_PREFIX_MAX_ENV
from remoting.model import DataVersion
from tests.integration.gateway_harness import GatewayProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PER_ADDRESS = 8
PER_PREFIX = 64
FLOODED = "127.0.7"
"""The flooded /24: 12 of its addresses, 8 connections each, 96 in all."""
FLOOD_ADDRESSES = 12
SOCKET_TIMEOUT_S = 5.0
CLOSE_WAIT_S = 5.0
SETTLE_S = 0.3
HANDED_OVER_S = 0.5
"""Time for the front to forget a connection it handed to the gateway."""
BROKER = DemoBroker("PrefixCluster", "broker-elsewhere", 0, "127.1.0.1:30961", "127.1.0.1:30962")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """An eventual-mode gateway behind its read front, with small caps."""
    root = tmp_path_factory.mktemp("prefix")
    process = GatewayProcess(
        "n1",
        root / "n1.sqlite3",
        root / "n1.ready.json",
        root / "n1.log",
        extra_args=("--read-front", "--connections-per-address-max", str(PER_ADDRESS)),
        extra_env={CONNECTIONS_PER_PREFIX_MAX_ENV: str(PER_PREFIX)},
    )
    process.start()
    try:
        yield process
    finally:
        process.terminate()


def connect(port: int, source: str) -> socket.socket:
    """A connection to the node from the local address ``source``."""
    return socket.create_connection(
        ("127.0.0.1", port), SOCKET_TIMEOUT_S, source_address=(source, 0)
    )


def closed_by_node(sockets: list[socket.socket], expected: int) -> set[int]:
    """Indices of the connections the node closes: waits until ``expected`` are closed
    (at most CLOSE_WAIT_S), then SETTLE_S more for any beyond. None sent a byte, so
    anything readable is an end of stream or a reset."""
    closed: set[int] = set()
    deadline_s = time.monotonic() + CLOSE_WAIT_S
    settle_at_s: float | None = None
    while time.monotonic() < (deadline_s if settle_at_s is None else settle_at_s):
        open_ones = [sock for i, sock in enumerate(sockets) if i not in closed]
        readable, _, _ = select.select(open_ones, [], [], 0.02)
        closed.update(sockets.index(sock) for sock in readable)
        if settle_at_s is None and len(closed) >= expected:
            settle_at_s = time.monotonic() + SETTLE_S
    return closed


def invoke(sock: socket.socket, request: RemotingCommand, opaque: int) -> RemotingCommand:
    """``request``'s answer on ``sock``; ConnectionError when the node closed it."""
    sock.sendall(encode_frame(dataclasses.replace(request, opaque=opaque)))
    decoder = FrameDecoder()
    while True:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("closed by the node")
        for answer in decoder.feed(data):
            if answer.opaque == opaque:
                return answer


def registration(counter: int) -> RemotingCommand:
    # Two topics: a new broker's one-topic registration is refused.
    table = topic_table(["PrefixTopic", BROKER.broker_name])
    return register_request(BROKER, table, DataVersion(1, counter))


def route_query(topic: str) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


@contextlib.contextmanager
def flood(port: int, subnet: str, addresses: int) -> Iterator[list[socket.socket]]:
    """PER_ADDRESS connections from each of ``addresses`` addresses of ``subnet``.0/24,
    all closed on exit."""
    sockets: list[socket.socket] = []
    try:
        for host in range(1, addresses + 1):
            sockets += [connect(port, f"{subnet}.{host}") for _ in range(PER_ADDRESS)]
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def test_a_subnet_s_flood_stops_at_its_cap_and_a_broker_from_elsewhere_registers(
    gateway: GatewayProcess,
) -> None:
    port = gateway.info["port"]
    with flood(port, FLOODED, FLOOD_ADDRESSES) as flooded:
        refused = closed_by_node(flooded, len(flooded) - PER_PREFIX)
        # One more address of the flooded /24 (under its own address cap) is refused too.
        with connect(port, f"{FLOODED}.200") as latecomer:
            late_refused = closed_by_node([latecomer], 1) == {0}

        with connect(port, "127.1.0.1") as broker:
            registered = invoke(broker, registration(1), 1)
            routed = invoke(broker, route_query("PrefixTopic"), 2)
            time.sleep(HANDED_OVER_S)  # handed to the gateway: the front counts it no more

            # Loopback as a whole: one more full /24 fits, a third /24 does not.
            with flood(port, "127.0.8", PER_PREFIX // PER_ADDRESS) as second:
                second_refused = closed_by_node(second, 0)
                with connect(port, "127.2.0.1") as third:
                    third_refused = closed_by_node([third], 1) == {0}

    assert len(refused) == len(flooded) - PER_PREFIX
    assert min(refused) == PER_PREFIX  # the first 64 were admitted, every later one refused
    assert late_refused
    assert registered.code == ResponseCode.SUCCESS, registered
    assert routed.code == ResponseCode.SUCCESS, routed
    assert second_refused == set()
    assert third_refused
    log = gateway.log_path.read_text(errors="replace")
    assert f"{FLOODED}.0/24 already holds {PER_PREFIX} connections (the maximum per prefix)" in log
    assert log.count("refusing") <= 2 * 10  # rate-limited: 10 lines per 10 s in each process
