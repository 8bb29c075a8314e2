"""The Raft port of a running raft-mode cluster authenticates before it deserializes.

PySyncObj unpickles what its peers send, so an unauthenticated byte reaching it
would be code execution. Each probe here is a real attacker on loopback; after
each one the cluster must still commit, and the marker file the payload would
create must not exist. And a flood of callers that never prove the secret, from
addresses no member has, does not keep a member from connecting again.
"""

from __future__ import annotations

import pickle
import selectors
import socket
import struct
import subprocess
import threading
import time
import zlib
from pathlib import Path

import pytest
from pysyncobj.encryptor import getEncryptor
from pysyncobj.utility import TcpUtility, UtilityException

from raftstore.raft.cipher import RaftCipher
from raftstore.raft.transport import PRE_AUTH_DEADLINE_S, UNAUTHENTICATED_MAX
from remoting.acl import Credentials, sign
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.integration.raft_cluster_harness import (
    RAFT_SECRET,
    RaftGateway,
    RaftGatewayCluster,
    register_frame,
    write_until_accepted,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DROP_WAIT_S = 5.0
WRITE_BOUND_S = 10.0
FLOOD_SOURCES = tuple(f"127.0.9.{host}" for host in range(1, 9))
"""Addresses no member has (the members are on 127.0.0.1, and so is the fault proxy
their links cross)."""
FLOOD_HELD_MAX = 256
"""The flood's own bound on open connections (it closes those the node dropped)."""
RECONNECT_S = 10.0
LINK_DELAY_MS = 50
"""A member's link as long as a WAN's: the strangers' connects outrun its first message."""


class CreatesAFile:
    """Unpickling this opens (and so creates) ``path``: proof of code execution."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.path), "w"))


def pysyncobj_frame(data: bytes) -> bytes:
    """PySyncObj's framing: a native int32 length, then the (maybe encrypted) bytes."""
    return struct.pack("i", len(data)) + data


def dropped(sock: socket.socket, wait_s: float = DROP_WAIT_S) -> bool:
    """True when the node closes the connection within ``wait_s`` without answering."""
    sock.settimeout(wait_s)
    try:
        return sock.recv(65536) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def connect(node: RaftGateway) -> socket.socket:
    return socket.create_connection(("127.0.0.1", node.raft_port), timeout=DROP_WAIT_S)


def still_commits(cluster: RaftGatewayCluster, index: int) -> None:
    """A new registration commits and every node converges on it."""
    before = max(n.node_status()["commit_index"] for n in cluster.running())
    write_until_accepted(cluster.nodes[0], register_frame(index), WRITE_BOUND_S)
    statuses = cluster.converged()
    assert all(s["commit_index"] > before for s in statuses)
    assert all(s["alarms"] == [] for s in statuses)


def test_the_raft_port_listens_on_the_nodes_address_only(cluster: RaftGatewayCluster) -> None:
    for node in cluster.nodes:
        listening = subprocess.run(
            ["ss", "-Hltn", f"sport = :{node.raft_port}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        local = [field for field in listening if field.endswith(f":{node.raft_port}")]
        assert local == [f"127.0.0.1:{node.raft_port}"], listening


def test_a_pickled_payload_sent_raw_runs_nothing(
    cluster: RaftGatewayCluster, tmp_path: Path
) -> None:
    marker = tmp_path / "owned-by-a-raw-pickle"
    payload = zlib.compress(pickle.dumps(CreatesAFile(marker)), 3)
    leader = cluster.nodes[cluster.leader()]

    with connect(leader) as sock:
        sock.sendall(pysyncobj_frame(payload))
        assert dropped(sock)

    assert not marker.exists()
    still_commits(cluster, 11)


def test_a_payload_encrypted_with_the_wrong_secret_runs_nothing(
    cluster: RaftGatewayCluster, tmp_path: Path
) -> None:
    """An attacker who knows the protocol and the address but not the secret: sealed
    with our cipher and a guessed secret, or as PySyncObj's own Fernet would (with the
    right secret even: this release does not speak it)."""
    marker = tmp_path / "owned-by-a-guessed-secret"
    payload = zlib.compress(pickle.dumps(CreatesAFile(marker)), 3)
    now = int(time.monotonic())
    tokens = [
        RaftCipher.from_secret("a-guessed-cluster-secret-of-length").encrypt_at_time(payload, now),
        getEncryptor(RAFT_SECRET).encrypt_at_time(payload, now),
    ]

    for token in tokens:
        for node in cluster.nodes:
            with connect(node) as sock:
                sock.sendall(pysyncobj_frame(token))
                assert dropped(sock)

    assert not marker.exists()
    still_commits(cluster, 12)


def test_a_huge_claimed_message_is_cut_before_it_is_buffered(
    cluster: RaftGatewayCluster,
) -> None:
    leader = cluster.nodes[cluster.leader()]

    with connect(leader) as sock:
        sock.sendall(struct.pack("i", 2**31 - 1) + b"\0" * 65536)
        assert dropped(sock)

    still_commits(cluster, 13)


def test_a_peer_that_trickles_bytes_is_dropped_at_the_pre_auth_deadline(
    cluster: RaftGatewayCluster,
) -> None:
    node = cluster.nodes[0]
    started = time.monotonic()

    with connect(node) as sock:
        sock.settimeout(1.0)
        # A plausible length word, then the message a byte a second: only a deadline ends it.
        sock.sendall(struct.pack("i", 1000))
        closed = False
        while time.monotonic() - started < PRE_AUTH_DEADLINE_S + DROP_WAIT_S:
            try:
                sock.sendall(b"x")
                if sock.recv(1) == b"":
                    closed = True
                    break
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break

    assert closed, "a byte a second kept the connection open"
    assert time.monotonic() - started >= PRE_AUTH_DEADLINE_S - 1.0


def test_the_status_command_needs_the_cluster_secret(cluster: RaftGatewayCluster) -> None:
    node = cluster.nodes[0]
    addr = f"127.0.0.1:{node.raft_port}"

    with pytest.raises(UtilityException):
        TcpUtility(timeout=3.0).executeCommand(addr, ["status"])
    with pytest.raises(UtilityException):
        TcpUtility(password="a-guessed-cluster-secret", timeout=3.0).executeCommand(
            addr, ["status"]
        )
    holder = TcpUtility(password=RAFT_SECRET, timeout=3.0)
    # PySyncObj's utility speaks Fernet; the nodes seal with raftstore.raft.cipher.
    holder._TcpUtility__connection.encryptor = RaftCipher.from_secret(RAFT_SECRET)
    status = holder.executeCommand(addr, ["status"])

    assert str(status["self"]) == node.raft_addr, "the secret holder gets the status"


def test_a_refused_admin_write_on_a_follower_proposes_nothing(
    cluster: RaftGatewayCluster,
) -> None:
    """The ACL decides on the node the request reached, before anything is proposed."""
    statuses = cluster.converged()
    follower = next(n for n in cluster.nodes if n.node_status()["state"] != "leader")
    put = RemotingCommand.request(
        RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v"}
    )

    answers = [
        follower.invoke(put).code,
        follower.invoke(sign(put, Credentials("intruder", "intruder-secret"))).code,
    ]

    assert answers == [ResponseCode.NO_PERMISSION, ResponseCode.NO_PERMISSION]
    time.sleep(0.5)
    after = cluster.converged()
    assert [s["commit_index"] for s in after] == [s["commit_index"] for s in statuses]


class ConnectFlood:
    """A thread connecting to a Raft port from :data:`FLOOD_SOURCES` as fast as the
    node accepts (non-blocking connects, so it never waits for a backlog to drain),
    never sending a byte; it counts the connections the node drops."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.connected = 0
        self.dropped = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="raft-connect-flood", daemon=True)

    def __enter__(self) -> ConnectFlood:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(DROP_WAIT_S)

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        opened = 0
        try:
            while not self._stop.is_set():
                while len(selector.get_map()) < FLOOD_HELD_MAX:
                    sock = socket.socket()
                    sock.setblocking(False)
                    sock.bind((FLOOD_SOURCES[opened % len(FLOOD_SOURCES)], 0))
                    opened += 1
                    sock.connect_ex(("127.0.0.1", self.port))
                    selector.register(sock, selectors.EVENT_WRITE)
                for key, events in selector.select(0.01):
                    ready = key.fileobj
                    assert isinstance(ready, socket.socket)
                    if events & selectors.EVENT_WRITE:  # connected, or refused
                        if ready.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                            self.connected += 1
                            selector.modify(ready, selectors.EVENT_READ)
                            continue
                    else:  # EOF or a reset: the node dropped it
                        self.dropped += 1
                    selector.unregister(ready)
                    ready.close()
        finally:
            for key in list(selector.get_map().values()):
                key.fileobj.close()  # type: ignore[union-attr]
            selector.close()


def peers_connected(node: RaftGateway) -> list[bool]:
    return [bool(peer["connected"]) for peer in node.node_status()["peers"]]


def test_members_reconnect_and_authenticate_while_strangers_flood_the_raft_port(
    cluster: RaftGatewayCluster,
) -> None:
    """The members dialling a node lose their connections while callers from other
    addresses churn through its unauthenticated slots (each new one drops the oldest,
    thousands a second). They dial again over links of LINK_DELAY_MS, so each one's
    first message arrives after thousands of strangers' connects (before, that dropped
    it every time); they prove the secret and the cluster commits, the flood running."""
    node = min(cluster.nodes, key=lambda n: n.raft_addr)  # both others dial it
    index = cluster.nodes.index(node)
    links = [name for name in cluster.proxy.links if name.endswith(f"->{index}")]

    try:
        with ConnectFlood(node.raft_port) as flood:
            wait_until(
                lambda: flood.dropped >= UNAUTHENTICATED_MAX,
                what="strangers dropped",
                timeout_s=RECONNECT_S,
            )
            for name in links:
                cluster.proxy.order(link=name, mode="drop")
            wait_until(
                lambda: not any(peers_connected(node)),
                what="every member's connection cut",
                timeout_s=RECONNECT_S,
            )
            for name in links:
                cluster.proxy.order(link=name, mode="pass", delay_ms=LINK_DELAY_MS)
            dropped_before = flood.dropped
            started_s = time.monotonic()
            wait_until(
                lambda: all(peers_connected(node)),
                what="every member reconnected",
                timeout_s=RECONNECT_S,
            )
            took_s = time.monotonic() - started_s
            dropped_meanwhile = flood.dropped - dropped_before
            still_commits(cluster, 14)
    finally:
        cluster.heal()

    assert took_s < RECONNECT_S
    assert dropped_meanwhile >= UNAUTHENTICATED_MAX, "the flood did not churn the slots"
