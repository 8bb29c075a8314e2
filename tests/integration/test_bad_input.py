"""Hostile and broken input: the gateway closes the offender and keeps serving everyone else.

Every case runs against one gateway; the state digest must not move, because
none of this input is a valid write.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.frame import decode_frame, encode_frame
from tests.integration.gateway_harness import (
    MASTER_ADDR,
    MASTER_HA,
    GatewayProcess,
    register_request,
    route_request,
)

pytestmark = pytest.mark.integration

FRAME_LENGTH_MAX = 16 * 1024 * 1024 - 4
IDLE_CONNECTIONS = 2000
SOCKET_TIMEOUT_S = 5.0


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """One gateway with a registered master, so there is state to protect."""
    folder: Path = tmp_path_factory.mktemp("bad-input")
    process = GatewayProcess(
        "n1", folder / "db.sqlite3", folder / "ready.json", folder / "gateway.log"
    ).start()
    broker = process.client()
    assert broker.invoke(register_request(0, MASTER_ADDR, MASTER_HA)).code == ResponseCode.SUCCESS
    yield process
    broker.close()
    process.terminate()


@pytest.fixture
def digest_is_unchanged(gateway: GatewayProcess) -> Iterator[None]:
    """Assert the table digest and version are the same after the test as before it."""
    before = gateway.node_status()
    yield
    after = gateway.node_status()
    assert (after["digest"], after["applied_version"]) == (
        before["digest"],
        before["applied_version"],
    )


def raw_socket(gateway: GatewayProcess) -> socket.socket:
    """A plain TCP connection to the public port."""
    sock = socket.create_connection(("127.0.0.1", gateway.info["port"]), SOCKET_TIMEOUT_S)
    sock.settimeout(SOCKET_TIMEOUT_S)
    return sock


def closed_by_peer(sock: socket.socket) -> bool:
    """True when the server closed the connection (EOF or reset)."""
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True


def still_serves_routes(gateway: GatewayProcess) -> bool:
    """Another client gets its route answered."""
    with gateway.client() as client:
        return client.invoke(route_request("TopicTest", 479)).code == ResponseCode.SUCCESS


@pytest.mark.parametrize(
    "garbage",
    [
        # Random, except that the first byte puts the length field past the 16 MiB
        # limit: with a first byte of 0 or 1 (one run in 128) the length is a valid one
        # and the server rightly waits for the rest of the frame, until its frame
        # deadline (test_a_truncated_frame_is_dropped_with_its_connection).
        pytest.param(b"\x7f" + os.urandom(4095), id="random-bytes"),
        pytest.param(struct.pack(">i", FRAME_LENGTH_MAX + 1) + b"\0" * 64, id="over-16-MiB"),
        pytest.param(struct.pack(">i", -5) + b"\0" * 8, id="negative-length"),
        pytest.param(struct.pack(">iI", 8, 100) + b"{}\0\0", id="header-longer-than-frame"),
        pytest.param(struct.pack(">iI", 20, 16) + b"not json at all!", id="undecodable-header"),
    ],
)
def test_a_broken_frame_closes_only_its_own_connection(
    gateway: GatewayProcess, digest_is_unchanged: None, garbage: bytes
) -> None:
    """NettyDecoder behaviour: no answer, the connection closes, other clients go on."""
    sock = raw_socket(gateway)
    try:
        sock.sendall(garbage)
        assert closed_by_peer(sock)
    finally:
        sock.close()
    assert still_serves_routes(gateway)


def test_a_truncated_frame_is_dropped_with_its_connection(
    gateway: GatewayProcess, digest_is_unchanged: None
) -> None:
    """Half a frame, then the client goes away: nothing is applied."""
    frame = encode_frame(register_request(0, "127.0.0.1:20911", "127.0.0.1:20912"))
    sock = raw_socket(gateway)
    sock.sendall(frame[: len(frame) // 2])
    sock.close()
    assert still_serves_routes(gateway)


def test_a_wrong_crc_is_refused_without_changing_anything(
    gateway: GatewayProcess, digest_is_unchanged: None
) -> None:
    """1 "crc32 not match" and the state stays as it was."""
    with gateway.client() as broker:
        answer = broker.invoke(register_request(0, "127.0.0.1:20911", "127.0.0.1:20912", crc=12345))
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")


@pytest.mark.parametrize("code", [0, 99999, 32767, 40001])
def test_unknown_codes_are_answered_not_supported(
    gateway: GatewayProcess, digest_is_unchanged: None, code: int
) -> None:
    """Any code the public port does not know (internal codes included) gets 3."""
    with gateway.client() as client:
        answer = client.invoke(RemotingCommand.request(code, {"secret": "x"}))
    assert (answer.code, answer.remark) == (
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
        f" request type {code} not supported",
    )


def test_one_way_requests_are_never_answered(
    gateway: GatewayProcess, digest_is_unchanged: None
) -> None:
    """One-way requests (good or bad) produce no frame; the next answer is the two-way one."""
    sock = raw_socket(gateway)
    try:
        for opaque, code in enumerate((RequestCode.GET_ROUTEINFO_BY_TOPIC, 99999), start=1):
            oneway = RemotingCommand.request(
                code, {"topic": "TopicTest"}, opaque=opaque, oneway=True
            )
            sock.sendall(encode_frame(oneway))
        sock.sendall(
            encode_frame(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, opaque=77))
        )
        length = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        payload = sock.recv(length, socket.MSG_WAITALL)
        answer = decode_frame(struct.pack(">i", length) + payload)
        assert (answer.opaque, answer.code) == (77, ResponseCode.SUCCESS)
    finally:
        sock.close()


def test_two_thousand_idle_connections_do_not_stop_other_clients(
    gateway: GatewayProcess, digest_is_unchanged: None
) -> None:
    """Idle peers cost a socket each, not service for everyone else."""
    idle: list[socket.socket] = []
    try:
        for _ in range(IDLE_CONNECTIONS):
            idle.append(
                socket.create_connection(("127.0.0.1", gateway.info["port"]), SOCKET_TIMEOUT_S)
            )
        assert still_serves_routes(gateway)
    finally:
        for sock in idle:
            sock.close()
    assert still_serves_routes(gateway)
