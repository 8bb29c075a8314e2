"""Hostile clients against a real ``run_gateway`` process: memory and service hold.

The attack measured before the limits existed: 30 connections each sending
15 MiB of a frame that claims 16 MiB and never finishing it took one gateway
from 85 MiB to 536 MiB of RSS. With the unfinished-frames budget the gateway
closes the connections that would pass it, its RSS stays within its baseline
plus the budget plus :data:`RSS_MARGIN_BYTES`, and ordinary clients are
answered during the attack and after it. The gateway runs with the default
limits, the ones ``run_gateway`` uses when no flag is given.
"""

from __future__ import annotations

import argparse
import socket
import struct
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.core.management import CommandError, load_command_class

from gateway.options import GatewayOptions
from namesrv_app.management.commands.run_gateway import positive
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.limits import (
    CONNECTIONS_PER_ADDRESS_MAX,
    FRAME_DEADLINE_S,
    UNFINISHED_FRAMES_BYTES_MAX,
)
from tests.integration.gateway_harness import (
    MASTER_ADDR,
    MASTER_HA,
    GatewayProcess,
    register_request,
)
from tests.waiting import wait_until
from tools.process_facts import rss_bytes

pytestmark = [pytest.mark.slow, pytest.mark.integration]

MIB = 1024 * 1024
ATTACKERS = 30
CLAIMED_FRAME_BYTES = 16 * MIB  # the frame's length word + 4: exactly the frame maximum
SENT_BYTES = 15 * MIB
CHUNK_BYTES = 256 * 1024
BUDGET_BYTES = UNFINISHED_FRAMES_BYTES_MAX  # run_gateway's default: no flag is given
# Above the budget, the gateway holds: the bytearrays' growth slack (up to an
# eighth of each), one 256 KiB read at a time, and allocator pages freed by the
# cut connections that glibc keeps instead of returning at once. Measured: 4 to
# 20 MiB above the budget; without a budget the same attack adds 450 MiB.
RSS_MARGIN_BYTES = 48 * MIB
RSS_SAMPLE_INTERVAL_S = 0.02
SOCKET_TIMEOUT_S = 10.0
CLIENT_TIMEOUT_S = 5.0


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    """One gateway with the default limits and a registered master."""
    process = GatewayProcess(
        "n1", tmp_path / "db.sqlite3", tmp_path / "ready.json", tmp_path / "gateway.log"
    ).start()
    # Kept open: in eventual mode closing it would unregister the master.
    broker = process.client()
    assert broker.invoke(register_request(0, MASTER_ADDR, MASTER_HA)).code == 0
    yield process
    broker.close()
    process.terminate()


def cluster_info_request() -> RemotingCommand:
    """GET_BROKER_CLUSTER_INFO, as any client sends it."""
    return RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)


class RssSampler(threading.Thread):
    """Samples a process's RSS until stopped and keeps the highest value."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_bytes = rss_bytes(pid)
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(RSS_SAMPLE_INTERVAL_S):
            self.peak_bytes = max(self.peak_bytes, rss_bytes(self.pid))

    def stop(self) -> int:
        """Stop sampling; the peak RSS seen."""
        self._stop_event.set()
        self.join()
        return self.peak_bytes


class ClusterInfoPoller(threading.Thread):
    """An ordinary client asking GET_BROKER_CLUSTER_INFO over and over until stopped."""

    def __init__(self, gateway: GatewayProcess) -> None:
        super().__init__(daemon=True)
        self.gateway = gateway
        self.answers: list[int] = []
        self.failures: list[str] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        with self.gateway.client(timeout_s=CLIENT_TIMEOUT_S) as client:
            while not self._stop_event.is_set():
                try:
                    answer = client.invoke(cluster_info_request())
                except Exception as exc:  # every failure is reported by the test
                    self.failures.append(repr(exc))
                    continue
                self.answers.append(answer.code)

    def stop(self) -> None:
        """Stop polling and wait for the last call."""
        self._stop_event.set()
        self.join()


def attack(port: int) -> socket.socket:
    """Send 15 MiB of a frame claiming 16 MiB; the socket, left open, never finished."""
    sock = socket.create_connection(("127.0.0.1", port), SOCKET_TIMEOUT_S)
    chunk = b"\0" * CHUNK_BYTES
    try:
        sock.sendall(struct.pack(">i", CLAIMED_FRAME_BYTES - 4))
        for _ in range(SENT_BYTES // CHUNK_BYTES):
            sock.sendall(chunk)
    except OSError:
        pass  # cut by the gateway: is_closed_by_peer tells
    return sock


def is_closed_by_peer(sock: socket.socket) -> bool:
    """True when the other end closed the connection (EOF or reset)."""
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def cluster_info_is_answered(gateway: GatewayProcess) -> bool:
    """A fresh ordinary client gets GET_BROKER_CLUSTER_INFO answered with the master."""
    with gateway.client(timeout_s=CLIENT_TIMEOUT_S) as client:
        answer = client.invoke(cluster_info_request())
    return answer.code == ResponseCode.SUCCESS and MASTER_ADDR.encode() in (answer.body or b"")


def test_thirty_never_finished_16_mib_frames_stay_within_the_budget(
    gateway: GatewayProcess,
) -> None:
    pid = int(gateway.info["pid"])
    assert cluster_info_is_answered(gateway)
    baseline_bytes = rss_bytes(pid)
    sampler, poller = RssSampler(pid), ClusterInfoPoller(gateway)
    sampler.start()
    poller.start()
    started_s = time.monotonic()

    with ThreadPoolExecutor(ATTACKERS) as pool:
        sockets = list(pool.map(attack, [gateway.info["port"]] * ATTACKERS))
    time.sleep(0.5)  # the gateway reads what the last sends left in its socket buffers
    try:
        closed = sum(is_closed_by_peer(sock) for sock in sockets)
        answered_during = cluster_info_is_answered(gateway)
        poller.stop()
        peak_bytes = sampler.stop()
    finally:
        for sock in sockets:
            sock.close()

    assert time.monotonic() - started_s < FRAME_DEADLINE_S  # the deadline cut nobody here
    assert closed >= ATTACKERS - BUDGET_BYTES // SENT_BYTES
    assert peak_bytes < baseline_bytes + BUDGET_BYTES + RSS_MARGIN_BYTES, (
        f"peak RSS {peak_bytes / MIB:.0f} MiB, baseline {baseline_bytes / MIB:.0f} MiB"
    )
    assert answered_during
    assert poller.answers and set(poller.answers) == {ResponseCode.SUCCESS}
    assert poller.failures == []
    assert cluster_info_is_answered(gateway)
    assert "past the budget" in gateway.log_path.read_text()


def test_the_deadline_and_address_cap_flags_reach_the_public_port(tmp_path: Path) -> None:
    process = GatewayProcess(
        "n1",
        tmp_path / "db.sqlite3",
        tmp_path / "ready.json",
        tmp_path / "gateway.log",
        extra_args=("--frame-deadline-s", "1", "--connections-per-address-max", "3"),
    ).start()
    port = process.info["port"]
    sockets = [socket.create_connection(("127.0.0.1", port), SOCKET_TIMEOUT_S) for _ in range(4)]
    try:
        slow, *_others, refused = sockets
        wait_until(
            lambda: is_closed_by_peer(refused), what="the fourth connection closed", timeout_s=2.0
        )
        slow.sendall(struct.pack(">i", 100) + b"\0" * 10)  # 10 of the frame's 104 bytes
        started_s = time.monotonic()

        wait_until(
            lambda: is_closed_by_peer(slow),
            what="the slow frame's connection closed",
            timeout_s=5.0,
        )
        assert time.monotonic() - started_s >= 0.9
        with process.client(timeout_s=CLIENT_TIMEOUT_S) as client:  # in a freed place
            assert client.invoke(cluster_info_request()).code == ResponseCode.SUCCESS
    finally:
        for sock in sockets:
            sock.close()
        assert process.terminate() == 0
    log_text = process.log_path.read_text()
    assert "the maximum per address" in log_text
    assert "frame unfinished after" in log_text


def run_gateway_parser() -> argparse.ArgumentParser:
    """The command line of ``manage.py run_gateway``."""
    command = load_command_class("namesrv_app", "run_gateway")
    return command.create_parser("manage.py", "run_gateway")


def test_run_gateway_uses_the_default_limits_when_no_flag_is_given() -> None:
    parser = run_gateway_parser()

    options = vars(parser.parse_args([]))

    assert options["unfinished_frames_bytes_max"] == UNFINISHED_FRAMES_BYTES_MAX == 64 * MIB
    assert options["frame_deadline_s"] == FRAME_DEADLINE_S == 30.0
    assert options["connections_per_address_max"] == CONNECTIONS_PER_ADDRESS_MAX == 4096
    defaults = GatewayOptions(node_id="n1")
    assert (
        defaults.unfinished_frames_bytes_max,
        defaults.frame_deadline_s,
        defaults.connections_per_address_max,
    ) == (UNFINISHED_FRAMES_BYTES_MAX, FRAME_DEADLINE_S, CONNECTIONS_PER_ADDRESS_MAX)


@pytest.mark.parametrize(
    "flag", ["--unfinished-frames-bytes-max", "--frame-deadline-s", "--connections-per-address-max"]
)
def test_run_gateway_refuses_a_limit_that_is_not_positive(flag: str) -> None:
    parser = run_gateway_parser()
    options = vars(parser.parse_args([flag, "0"]))

    with pytest.raises(CommandError, match=f"{flag} must be positive"):
        positive(options, flag.removeprefix("--").replace("-", "_"))
