"""Hostile frames against a launched raft cluster: no frame stalls other brokers, and
no peer changes a broker entry it does not hold.

``cluster up --mode raft --demo-sim``: three gateways behind their read fronts, with
the simulated brokers (broker-a and broker-b, master and slave) holding their entries.
A prober registers a small broker of its own every 50 ms on its own connection and
times each answer, as the issue that asked for this measured it. An attacker on
loopback (white-listed for brokers, as ``cluster up`` does) then sends, one at a time:

1. a 0.5 MB compressed REGISTER_BROKER within the inflation limit: a random 720 KB topic
   name, and a topic whose attribute text is 60 MB of single-quoted lenient JSON (it
   was accepted after 11 s, every other registration waiting 10 s);
2. a 15 MiB QUERY_DATA_VERSION body of the same lenient JSON (decoded for 2.5 s);
3. broker-a's master re-registered at its own address over a new connection, with
   ``haServerAddr=127.0.0.1:1`` (accepted, and the next slave was told to follow it);
4. a REGISTER_BROKER body that passes every limit and is costly to decode, which the
   gateway decodes in its worker process.

Each hostile frame gets a clear refusal, the legal one its answer; the prober's
registrations are answered within 250 ms throughout, and broker-a's entry is
unchanged on every node.
"""

from __future__ import annotations

import base64
import random
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from localcluster.demo import DemoBroker, register_request, topic_table
from remoting.blocking import BlockingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.model import DataVersion, TopicConfigSerializeWrapper
from remoting.register_body import body_crc32, register_broker_request
from tests.integration.cluster_fixtures import (
    TEST_CLUSTER,
    query_route,
    remoting_addr,
    start_cluster,
    stop_cluster,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

NODES = 3
PROBE_PERIOD_S = 0.05
PROBES_MIN = 5
"""The prober runs at least this many probes, however quickly the attack is answered
(three refusals can take less than four periods)."""
ANSWER_BOUND_S = 0.25
"""Other brokers' registrations are answered within this while a hostile frame is read."""
WIRE_TIMEOUT_S = 30.0
MASTER_A = "127.0.0.1:10911"
MASTER_A_HA = "127.0.0.1:10912"
"""broker-a's master as the simulated fleet announces it (localcluster/demo.py)."""
LENIENT_UNIT = b'"a":\'"\','
"""One member of the lenient JSON that used to cost a Python step per quote."""


@dataclass(frozen=True, slots=True)
class Probe:
    """One timed registration of the prober."""

    sent_s: float
    took_s: float
    code: int


class Prober:
    """A broker of its own registering every 50 ms on one connection, each answer timed."""

    def __init__(self, addr: str) -> None:
        broker = DemoBroker(TEST_CLUSTER, "broker-probe", 0, "127.0.0.1:19911", "127.0.0.1:19912")
        self.request = register_request(
            broker, topic_table(["ProbeTopic", "broker-probe"]), DataVersion(1, 1, 1)
        )
        self.client = BlockingClient(addr, timeout_s=WIRE_TIMEOUT_S)
        self.probes: list[Probe] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="prober", daemon=True)

    def __enter__(self) -> Prober:
        assert self.client.invoke(self.request).code == ResponseCode.SUCCESS
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            sent_s = time.monotonic()
            code = self.client.invoke(self.request).code
            took_s = time.monotonic() - sent_s
            self.probes.append(Probe(sent_s, took_s, code))
            self._stop.wait(max(0.0, PROBE_PERIOD_S - took_s))

    def during(self, start_s: float, end_s: float) -> list[Probe]:
        """The probes that overlapped [start_s, end_s]."""
        return [p for p in self.probes if p.sent_s <= end_s and p.sent_s + p.took_s >= start_s]

    def __exit__(self, *_: object) -> None:
        deadline_s = time.monotonic() + WIRE_TIMEOUT_S
        while len(self.probes) < PROBES_MIN and time.monotonic() < deadline_s:
            time.sleep(PROBE_PERIOD_S)
        self._stop.set()
        self._thread.join(WIRE_TIMEOUT_S)
        self.client.close()


@dataclass
class Cluster:
    summary: dict[str, Any]

    def addr(self, index: int) -> str:
        return remoting_addr(self.summary, index)

    @property
    def addrs(self) -> list[str]:
        return [self.addr(i) for i in range(NODES)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    run_dir = tmp_path_factory.mktemp("hostile-raft") / "run"
    summary = start_cluster(run_dir, "--mode", "raft", "--demo-sim", nodes=NODES)
    try:
        running = Cluster(summary)
        wait_until(
            lambda: all(_master_of(addr, "broker-a") == MASTER_A for addr in running.addrs),
            what="the simulated brokers registered",
            timeout_s=30.0,
            interval_s=0.2,
        )
        yield running
    finally:
        stop_cluster(run_dir)


def _master_of(addr: str, name: str) -> str | None:
    _, route = query_route(addr, "TopicTest")
    for data in [] if route is None else route.broker_datas:
        if data.broker_name == name:
            return data.broker_addrs.get(0)
    return None


def _followed_ha_addr(addr: str) -> str | None:
    """The HA address a new slave of broker-a is told to follow, by the node at ``addr``
    (what the hijack used to redirect): a slave id of its own registers there."""
    slave = DemoBroker(TEST_CLUSTER, "broker-a", 9, "127.0.0.1:19999", "127.0.0.1:20000")
    request = register_request(slave, topic_table(["TopicTest", "broker-a"]), DataVersion(1, 1, 1))
    with BlockingClient(addr, timeout_s=WIRE_TIMEOUT_S) as client:
        answer = client.invoke(request)
    assert answer.code == ResponseCode.SUCCESS, answer
    return (answer.ext_fields or {}).get("haServerAddr")


def _block(raw: bytes) -> bytes:
    return len(raw).to_bytes(4, "big") + raw


def _bomb_register() -> RemotingCommand:
    """Hostile frame 1: a compressed 5.x body within the inflation limit, carrying a
    random 720 KB topic name and 60 MB of lenient JSON as one topic's attributes."""
    name = base64.b64encode(random.Random(44).randbytes(540_000))
    attributes = b"{" + LENIENT_UNIT * 7_500_000 + b'"a":1}'
    payload = b"".join(
        (
            _block(b'{"counter":1,"stateVersion":0,"timestamp":1}'),
            (2).to_bytes(4, "big"),
            _block(name + b" 8 8 6 SINGLE_TAG {}"),
            _block(b"Bombed 8 8 6 SINGLE_TAG " + attributes),
            _block(b"[]"),
            (0).to_bytes(4, "big"),
        )
    )
    body = zlib.compress(payload, 6)
    assert len(payload) < 128 * len(body), "within the inflation limit, as the attack was"
    fields = {
        "brokerAddr": "127.0.0.1:29911",
        "brokerId": "0",
        "brokerName": "broker-bomb",
        "clusterName": TEST_CLUSTER,
        "haServerAddr": "127.0.0.1:29912",
        "compressed": "true",
        "bodyCrc32": str(body_crc32(body)),
    }
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, fields, body)


def _lenient_query_data_version() -> RemotingCommand:
    """Hostile frame 2: QUERY_DATA_VERSION with 15 MiB of lenient JSON for a body."""
    body = b"{" + LENIENT_UNIT * (15 * 1024 * 1024 // len(LENIENT_UNIT)) + b'"a":1}'
    fields = {
        "brokerAddr": "127.0.0.1:29921",
        "brokerId": "0",
        "brokerName": "broker-lenient",
        "clusterName": TEST_CLUSTER,
    }
    return RemotingCommand.request(RequestCode.QUERY_DATA_VERSION, fields, body)


def _hijack() -> RemotingCommand:
    """Hostile frame 3: broker-a's master at its own address, its slaves sent to :1."""
    broker = DemoBroker(TEST_CLUSTER, "broker-a", 0, MASTER_A, "127.0.0.1:1")
    return register_request(
        broker, topic_table(["TopicTest", "DemoOrders", "DemoEvents"]), DataVersion(1, 1, 1)
    )


def _costly_legal_register() -> RemotingCommand:
    """A body past the gateway's inline size that passes every limit: a thousand
    topics with long names and attributes (decoded in the worker process)."""
    topics = topic_table([f"Costly-{i:05d}-" + "x" * 400 for i in range(1000)])
    broker = DemoBroker(TEST_CLUSTER, "broker-costly", 0, "127.0.0.1:29931", "127.0.0.1:29932")
    return register_broker_request(
        cluster_name=broker.cluster,
        broker_name=broker.broker_name,
        broker_id=broker.broker_id,
        broker_addr=broker.addr,
        ha_server_addr=broker.ha_addr,
        wrapper=TopicConfigSerializeWrapper(
            data_version=DataVersion(1, 1, 1), topic_config_table=topics
        ),
    )


def _send(addr: str, request: RemotingCommand) -> tuple[RemotingCommand | None, float, float]:
    """``request`` on a connection of its own: the answer (None when the node closed the
    connection instead), and when it was sent and answered."""
    with BlockingClient(addr, timeout_s=WIRE_TIMEOUT_S) as client:
        sent_s = time.monotonic()
        try:
            answer: RemotingCommand | None = client.invoke(request)
        except (ConnectionError, OSError):
            answer = None
        return answer, sent_s, time.monotonic()


HOSTILE = {
    "compressed-lenient-attributes": _bomb_register,
    "lenient-query-data-version": _lenient_query_data_version,
}


@pytest.mark.parametrize("frame", sorted(HOSTILE))
def test_a_hostile_body_is_refused_and_stalls_no_other_broker(cluster: Cluster, frame: str) -> None:
    request = HOSTILE[frame]()
    with Prober(cluster.addr(0)) as prober:
        time.sleep(0.3)
        answer, sent_s, answered_s = _send(cluster.addr(0), request)
        time.sleep(0.3)

    assert answer is not None and answer.code == ResponseCode.SYSTEM_ERROR, answer
    assert answer.remark is not None and "refused" in answer.remark, answer.remark
    assert answered_s - sent_s < 2.0, f"refused after {answered_s - sent_s:.2f} s"
    _assert_answered_in_time(prober, sent_s, answered_s)


def test_a_costly_legal_body_is_decoded_off_the_loop_and_stalls_no_other_broker(
    cluster: Cluster,
) -> None:
    request = _costly_legal_register()
    with Prober(cluster.addr(0)) as prober:
        time.sleep(0.3)
        answer, sent_s, answered_s = _send(cluster.addr(0), request)
        time.sleep(0.3)

    assert answer is not None and answer.code == ResponseCode.SUCCESS, answer
    _assert_answered_in_time(prober, sent_s, answered_s)


def test_a_hijack_of_a_live_masters_ha_address_is_refused_on_every_node(
    cluster: Cluster,
) -> None:
    with Prober(cluster.addr(0)) as prober:
        answers = [_send(addr, _hijack()) for addr in cluster.addrs]

    for answer, _, _ in answers:
        assert answer is not None and answer.code == ResponseCode.NO_PERMISSION, answer
        assert answer.remark is not None and "haServerAddr" in answer.remark
    _assert_answered_in_time(prober, answers[0][1], answers[-1][2])
    for addr in cluster.addrs:
        assert _master_of(addr, "broker-a") == MASTER_A
        assert _followed_ha_addr(addr) == MASTER_A_HA


def _assert_answered_in_time(prober: Prober, start_s: float, end_s: float) -> None:
    during = prober.during(start_s, end_s)
    slowest_s = max((p.took_s for p in prober.probes), default=0.0)
    assert all(p.code == ResponseCode.SUCCESS for p in prober.probes)
    assert len(prober.probes) >= PROBES_MIN, "the prober ran"
    assert slowest_s < ANSWER_BOUND_S, (
        f"a registration waited {slowest_s * 1000:.0f} ms "
        f"({len(during)} of {len(prober.probes)} during the frame)"
    )
