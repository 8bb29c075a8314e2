"""The read front (gateway/front.py): real ``run_gateway --read-front`` processes.

The front owns the public port, answers route queries from copies and passes everything
else to the gateway over a Unix socket. What must hold: no copy is ever older than an
acknowledged write (on another connection too), the gateway sees each client's own
address (ACL white list, channel close), bad input is cut at the front, and the front is
restarted when it dies and exits when its gateway does.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import signal
import socket
import stat
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.acl import namesrv_acl
from localcluster.demo import DemoBroker, register_request, topic_table
from remoting.acl import Credentials, sign
from remoting.blocking import BlockingClient
from remoting.bodies import decode_topic_route_data
from remoting.client import RemotingClientError
from remoting.codes import FLAG_ONEWAY, RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.consistency import ROUTES_VERSION_FIELD
from remoting.frame import FrameDecoder, encode_frame
from remoting.model import DataVersion
from tests.integration.gateway_harness import (
    ACL_FILE_NAME,
    BROKER_ACCOUNT,
    WAIT_S,
    GatewayProcess,
)
from tests.integration.raft_cluster_harness import RaftGatewayCluster
from tests.waiting import wait_until
from tools import ports, process_facts

BROKER = DemoBroker("FrontCluster", "broker-front", 0, "127.0.0.1:30911", "127.0.0.1:30912")
ROUNDS = 30
BROKER_VERSIONS = itertools.count(1)
"""BROKER's DataVersion counter: it only rises, as one broker's does, across every
registration of the module (a registration earlier in the broker's own history than the
one a node holds changes only liveness: docs/RAFT.md, "Late copies")."""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """One eventual-mode gateway behind its read front."""
    root = tmp_path_factory.mktemp("front")
    process = GatewayProcess(
        "n1",
        root / "n1.sqlite3",
        root / "n1.ready.json",
        root / "n1.log",
        extra_args=("--read-front", "--metrics-port", str(ports.free_port())),
    )
    process.start()
    try:
        yield process
    finally:
        process.terminate()


def route_query(topic: str) -> RemotingCommand:
    """GET_ROUTEINFO_BY_TOPIC for ``topic``."""
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, "acceptStandardJsonOnly": "true"}
    )


def route(client: BlockingClient, topic: str) -> RemotingCommand:
    """GET_ROUTEINFO_BY_TOPIC over ``client``."""
    return client.invoke(route_query(topic))


def queue_nums(answer: RemotingCommand) -> int:
    """The read queue count of the route's only queue data."""
    assert answer.code == ResponseCode.SUCCESS and answer.body is not None, answer
    (queue,) = decode_topic_route_data(answer.body).queue_datas
    return queue.read_queue_nums


def front_pid(gateway_pid: int) -> int:
    """The pid of the gateway's front (its child running gateway.front)."""
    for pid in process_facts.children(gateway_pid):
        if "gateway.front" in process_facts.command_line(pid):
            return pid
    raise AssertionError(f"no front process under pid {gateway_pid}")


def is_dead(pid: int) -> bool:
    """True once ``pid`` is gone or a zombie (killed, not yet reaped)."""
    return not process_facts.is_running(pid)


def routes_version(answer: RemotingCommand) -> int:
    """The answering node's routes version (ext ``routesVersion``)."""
    return int((answer.ext_fields or {})[ROUTES_VERSION_FIELD])


def read_your_writes(
    writer: BlockingClient, reader: BlockingClient, topic: str, rounds: int
) -> None:
    """Each round re-registers ``topic`` with a new queue count over ``writer``; the next
    read over ``reader`` (another connection) must show it, with a routes version past
    every answer of the rounds before (served by the front or fetched, the same)."""
    seen = routes_version(route(reader, topic))
    for round_no in range(1, rounds + 1):
        answer = writer.invoke(
            register_request(
                # Two topics: a new broker's one-topic registration is refused.
                BROKER,
                topic_table([topic, BROKER.broker_name], queue_nums=round_no),
                DataVersion(timestamp=1_700_000_000_000, counter=next(BROKER_VERSIONS)),
            )
        )
        assert answer.code == ResponseCode.SUCCESS, answer
        # Read several times: the first read after the change fetches, the others are
        # served from the front's new copy.
        versions = set()
        for _ in range(3):
            answer = route(reader, topic)
            assert queue_nums(answer) == round_no
            versions.add(routes_version(answer))
        assert min(versions) > seen, (round_no, versions, seen)
        seen = max(versions)


def test_no_route_answer_is_older_than_an_acknowledged_write(gateway: GatewayProcess) -> None:
    with gateway.client() as writer, gateway.client() as reader:
        assert route(reader, "FrontTopic").code == ResponseCode.TOPIC_NOT_EXIST
        assert route(reader, "FrontTopic").code == ResponseCode.TOPIC_NOT_EXIST
        read_your_writes(writer, reader, "FrontTopic", ROUNDS)


def test_the_gateway_sees_the_client_address_through_the_front(gateway: GatewayProcess) -> None:
    """Unsigned admin writes are refused, signed ones pass: the gateway's ACL decides with
    the client's address (a loopback broker registered unsigned in the test above)."""
    put = RemotingCommand.request(
        RequestCode.PUT_KV_CONFIG, {"namespace": "front", "key": "k", "value": "v"}
    )
    with gateway.client() as plain:
        assert plain.invoke(put).code == ResponseCode.NO_PERMISSION
        # The connection is kept and still served.
        assert route(plain, "FrontTopic").code in (0, ResponseCode.TOPIC_NOT_EXIST)
    with gateway.admin_client() as admin:
        assert admin.invoke(put).code == ResponseCode.SUCCESS


def test_a_broker_connection_closing_unregisters_it_in_eventual_mode(
    gateway: GatewayProcess,
) -> None:
    other = DemoBroker("FrontCluster", "broker-closing", 0, "127.0.0.1:30921", "127.0.0.1:30922")
    with gateway.client() as broker_conn:
        answer = broker_conn.invoke(
            register_request(
                other, topic_table(["ClosingTopic", other.broker_name]), DataVersion(1, 1)
            )
        )
        assert answer.code == ResponseCode.SUCCESS
        with gateway.client() as reader:
            assert route(reader, "ClosingTopic").code == ResponseCode.SUCCESS
    with gateway.client() as reader:
        wait_until(
            lambda: route(reader, "ClosingTopic").code == ResponseCode.TOPIC_NOT_EXIST,
            what="ClosingTopic gone from the route",
            timeout_s=WAIT_S,
        )


class RawConnection:
    """One TCP connection speaking frames, never reopened (BlockingClient reconnects
    silently, which would hide whether the connection itself survived)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=3.0)
        self.decoder = FrameDecoder()
        self.opaque = 0
        self.seen_opaques: list[int] = []

    def invoke(self, request: RemotingCommand) -> RemotingCommand:
        """The answer; ConnectionError when the connection was closed."""
        self.opaque += 1
        self.sock.sendall(encode_frame(dataclasses.replace(request, opaque=self.opaque)))
        while True:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed")
            for answer in self.decoder.feed(data):
                self.seen_opaques.append(answer.opaque)
                if answer.opaque == self.opaque:
                    return answer

    def close(self) -> None:
        self.sock.close()


def test_a_broker_s_connection_moves_to_the_gateway_and_outlives_the_front(
    gateway: GatewayProcess,
) -> None:
    """At its first REGISTER_BROKER a broker's connection is handed to the gateway
    (gateway/handoff.py): killing the front then drops a reader's connection, which it
    held, but not the broker's, which keeps being answered (writes and reads)."""
    mover = DemoBroker("FrontCluster", "broker-moved", 0, "127.0.0.1:30931", "127.0.0.1:30932")

    def registration(counter: int) -> RemotingCommand:
        table = topic_table(["MovedTopic", mover.broker_name])
        return register_request(mover, table, DataVersion(1, counter))

    adopted = 'namesrv_front_handoffs_total{outcome="adopted"}'
    before = scraped(gateway, adopted)
    port = gateway.info["port"]
    broker_conn, reader = RawConnection(port), RawConnection(port)
    try:
        assert reader.invoke(route_query("MovedTopic")).code == ResponseCode.TOPIC_NOT_EXIST
        assert broker_conn.invoke(registration(1)).code == ResponseCode.SUCCESS
        wait_until(
            lambda: scraped(gateway, adopted) == before + 1,
            what="the connection handed to the gateway",
            timeout_s=WAIT_S,
        )
        assert scraped(gateway, 'namesrv_front_handoffs_total{outcome="refused"}') == 0
        old = front_pid(gateway.info["pid"])
        os.kill(old, signal.SIGKILL)
        wait_until(lambda: is_dead(old), what=f"the old front {old} gone", timeout_s=WAIT_S)
        with pytest.raises(ConnectionError):
            reader.invoke(route_query("MovedTopic"))
        assert broker_conn.invoke(registration(2)).code == ResponseCode.SUCCESS
        assert broker_conn.invoke(route_query("MovedTopic")).code == ResponseCode.SUCCESS
        wait_for_a_new_front(gateway, old)
        with gateway.client() as fresh:
            assert route(fresh, "MovedTopic").code == ResponseCode.SUCCESS
    finally:
        broker_conn.close()
        reader.close()


def scraped(gateway: GatewayProcess, name: str) -> float:
    """One sample of the gateway's metrics port (0 when absent)."""
    url = f"http://127.0.0.1:{gateway.info['metrics_port']}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def test_a_broker_request_the_acl_refuses_is_answered_by_the_front_and_not_handed_over(
    gateway: GatewayProcess,
) -> None:
    """Signed with a wrong key (a present signature is checked even from a white-listed
    address), a REGISTER_BROKER gets the gateway's own answer, NO_PERMISSION with the
    ACL's remark, from the front; a one-way BROKER_HEARTBEAT gets none. The connection
    stays with the front, and nothing reached the gateway: no hand-over, no refusal
    counted there. Signed right, the same connection then moves."""
    hostile = DemoBroker("FrontCluster", "broker-forged", 0, "127.0.0.1:30951", "127.0.0.1:30952")
    forger = Credentials(BROKER_ACCOUNT.access_key, "not-the-broker-secret-key")
    table = topic_table(["ForgedTopic", hostile.broker_name])
    forged = sign(register_request(hostile, table, DataVersion(1, 1)), forger)
    heartbeat = dataclasses.replace(
        sign(RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, {}), forger),
        flag=FLAG_ONEWAY,
        opaque=777,
    )
    # The gateway's ACL over the same accounts file decides the same, word for word.
    acl = namesrv_acl(gateway.db_path.parent / ACL_FILE_NAME)
    refusal = acl.check(forged, "127.0.0.1")
    assert refusal is not None and "signature does not match" in refusal.remark
    adopted = 'namesrv_front_handoffs_total{outcome="adopted"}'
    bad_signature = 'namesrv_acl_refusals_total{reason="bad-signature"}'
    before = (scraped(gateway, adopted), scraped(gateway, bad_signature))

    conn = RawConnection(gateway.info["port"])
    try:
        answer = conn.invoke(forged)
        conn.sock.sendall(encode_frame(heartbeat))
        read = conn.invoke(route_query("ForgedTopic"))
        after = (scraped(gateway, adopted), scraped(gateway, bad_signature))
        signed = sign(register_request(hostile, table, DataVersion(1, 2)), BROKER_ACCOUNT)
        moved = conn.invoke(signed)
        wait_until(
            lambda: scraped(gateway, adopted) == before[0] + 1,
            what="the hostile connection handed to the gateway",
            timeout_s=WAIT_S,
        )
    finally:
        conn.close()

    assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, refusal.remark)
    assert read.code == ResponseCode.TOPIC_NOT_EXIST  # the front still serves it
    assert heartbeat.opaque not in conn.seen_opaques  # one-way: refused without a word
    assert after == before
    assert moved.code == ResponseCode.SUCCESS


def test_route_answers_of_the_front_are_counted_by_the_gateway(gateway: GatewayProcess) -> None:
    """Reads the front answers never reach the gateway; the front reports their count."""
    before = scraped(gateway, "namesrv_front_route_answers_total")
    with gateway.client() as reader:
        for _ in range(50):
            route(reader, "TopicCounted")
    # The first read fetched the answer; the other 49 were copies.
    wait_until(
        lambda: scraped(gateway, "namesrv_front_route_answers_total") - before >= 49,
        what="49 route answers copied by the front",
        timeout_s=10.0,
    )


def test_a_client_cannot_speak_the_fronts_private_codes(gateway: GatewayProcess) -> None:
    """99877 (route answers to count) and 99876 (the client's address) from a client are
    unknown codes like any other: the count does not move and the address stays its own."""
    before = scraped(gateway, "namesrv_front_route_answers_total")
    report = RemotingCommand.request(99_877, {"routeAnswers": "1000000"})
    peer = RemotingCommand.request(99_876, {"peer": "10.9.9.9:1"})
    with gateway.client() as client:
        answers = [client.invoke(report), client.invoke(peer)]
        route(client, "TopicNobodyServes")  # the link still works after both

    assert [a.code for a in answers] == [ResponseCode.REQUEST_CODE_NOT_SUPPORTED] * 2
    time.sleep(1.5)  # a report period of the front
    assert scraped(gateway, "namesrv_front_route_answers_total") - before < 1000


def test_a_bad_frame_closes_only_its_own_connection(gateway: GatewayProcess) -> None:
    host, port = gateway.addr.rsplit(":", 1)
    with gateway.client() as good:
        before = route(good, "TopicNobodyServes")
        with socket.create_connection((host, int(port)), timeout=5) as bad:
            # A frame whose header length exceeds the frame: the decoder refuses it.
            bad.sendall((12).to_bytes(4, "big") + (1_000).to_bytes(4, "big") + b"x" * 8)
            assert bad.recv(1024) == b"", "the front closes the bad connection without answer"
        after = route(good, "TopicNobodyServes")
    assert (after.code, after.body) == (before.code, before.body)


def test_the_gateway_socket_is_private_to_its_user(gateway: GatewayProcess) -> None:
    folder = Path(gateway.info["front_socket"]).parent
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(Path(gateway.info["front_socket"]).stat().st_mode) == 0o600


def thread_nices(pid: int) -> list[int]:
    """The nice values of the threads of ``pid``, sorted."""
    return sorted(os.getpriority(os.PRIO_PROCESS, tid) for tid in process_facts.thread_ids(pid))


def test_the_gateway_runs_below_its_front(gateway: GatewayProcess) -> None:
    """Route reads get the larger share of busy cores: every thread of the gateway
    runs five nice steps (the default) below the front, which keeps this test's."""
    base = os.getpriority(os.PRIO_PROCESS, 0)
    assert set(thread_nices(gateway.info["pid"])) == {min(19, base + 5)}
    assert set(thread_nices(front_pid(gateway.info["pid"]))) == {base}


def wait_for_a_new_front(gateway: GatewayProcess, old: int) -> None:
    """Until a front other than ``old`` serves route reads."""

    def served_by_a_new_front() -> bool:
        try:
            with gateway.client(timeout_s=1.0) as client:
                answer = route(client, "FrontTopic")
        except (OSError, RemotingClientError):
            # Not up yet, or slow to answer on a loaded machine: ask again.
            return False
        served = answer.code in (0, ResponseCode.TOPIC_NOT_EXIST)
        return served and front_pid(gateway.info["pid"]) != old

    wait_until(served_by_a_new_front, what="a new front serving", timeout_s=15.0)


def test_a_killed_front_is_restarted(gateway: GatewayProcess) -> None:
    old = front_pid(gateway.info["pid"])
    os.kill(old, signal.SIGKILL)
    wait_for_a_new_front(gateway, old)
    # Set back to the first front's priority; a user without CAP_SYS_NICE (not root)
    # gets a warning and the gateway's priority instead.
    base = os.getpriority(os.PRIO_PROCESS, 0)
    expected = base if os.geteuid() == 0 else min(19, base + 5)
    assert set(thread_nices(front_pid(gateway.info["pid"]))) == {expected}


def test_the_front_exits_when_its_gateway_is_killed(tmp_path: Path) -> None:
    process = GatewayProcess(
        "n9",
        tmp_path / "n9.sqlite3",
        tmp_path / "n9.ready.json",
        tmp_path / "n9.log",
        extra_args=("--read-front",),
    )
    process.start()
    assert process.proc is not None
    front_pid(process.info["pid"])
    process.proc.kill()
    process.proc.wait()

    def port_free() -> bool:
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", process.info["port"]))
                probe.listen()
            except OSError:
                return False
            return True

    # The front dies with it at once, so a restarted gateway can bind the port again.
    wait_until(
        port_free,
        what="the port free (the front gone with its gateway)",
        timeout_s=0.5,
        interval_s=0.02,
    )


def test_raft_mode_reads_through_a_front_see_the_node_s_own_writes(tmp_path: Path) -> None:
    """Raft mode: a write acknowledged by a node is in the next read of that node's front,
    on every node (each answers after applying locally)."""
    cluster = RaftGatewayCluster(tmp_path, extra_args=("--read-front",))
    try:
        cluster.start()
        cluster.leader()
        for index, node in enumerate(cluster.nodes):
            with node.client() as writer, node.client() as reader:
                read_your_writes(writer, reader, f"RaftFrontTopic{index}", 10)
        for status in cluster.converged():
            assert not status["alarms"], status
    finally:
        cluster.stop()
