"""The gateway's Prometheus metrics, scraped over HTTP from real in-process gateways.

Requests go over the real remoting wire (``remoting.client.RemotingClient``), the
metrics come back over the real metrics port, parsed with prometheus_client's own
text parser.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.metrics import (
    KNOWN_CODES,
    OTHER_CODE,
    GatewayMetrics,
    metrics_bind_host,
)
from gateway.options import GatewayOptions
from gateway.private_codes import InternalCode
from gateway.server import Gateway
from localcluster.demo import DemoBroker, register_request, topic_table
from raftstore.replicator import LocalReplicator
from raftstore.vocab import MODE_RAFT
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.model import DataVersion
from tests.integration.gateway_harness import ADMIN, write_test_acl
from tests.raftstore.raft_node import InProcessCluster
from tests.waiting import eventually
from tools.ports import free_port

SECRET = "metrics-test-secret"
CLUSTER = "MetricsCluster"
HTTP_TIMEOUT_S = 10.0
LEADER_TIMEOUT_S = 20.0
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def broker(index: int) -> DemoBroker:
    """A master of its own group on a port nobody listens on."""
    port = 30_000 + 10 * index
    return DemoBroker(CLUSTER, f"broker-{index}", 0, f"127.0.0.1:{port}", f"127.0.0.1:{port + 1}")


def register_frame(index: int) -> RemotingCommand:
    """REGISTER_BROKER of ``broker(index)`` with two topics (the single-topic guard)."""
    b = broker(index)
    return register_request(
        b, topic_table([f"MetricsTopic{index}", b.broker_name]), DataVersion(timestamp=1, counter=1)
    )


def route_frame(topic: str) -> RemotingCommand:
    """GET_ROUTEINFO_BY_TOPIC."""
    return RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


async def http_request(port: int, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``raw`` to the metrics port; (status, lower-cased headers, body)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), HTTP_TIMEOUT_S)
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split(" ")[1]), headers, body


async def scrape(port: int) -> Samples:
    """GET /metrics, parsed: (sample name, labels) -> value."""
    status, headers, body = await http_request(
        port, b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/plain\r\n\r\n"
    )
    assert status == 200, body
    assert headers["content-type"].startswith("text/plain")
    assert int(headers["content-length"]) == len(body)
    samples: Samples = {}
    for family in text_string_to_metric_families(body.decode("utf-8")):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """One sample's value (None when absent)."""
    return samples.get((name, frozenset(labels.items())))


def total(samples: Samples, name: str) -> float:
    """The sum of every series of ``name``."""
    return sum(v for (n, _labels), v in samples.items() if n == name)


def options(tmp_path: Path, **overrides: object) -> GatewayOptions:
    """An eventual-mode gateway on free ports with the tests' ACL file and metrics on."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    fields: dict[str, object] = {
        "node_id": "n1",
        "port": 0,
        "internal_port": 0,
        "internal_secret": SECRET,
        "acl_file": write_test_acl(tmp_path),
        "metrics_port": free_port(),
        "drain_timeout_s": 1.0,
        **overrides,
    }
    return GatewayOptions(**fields)  # type: ignore[arg-type]


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    """A started eventual-mode gateway with its metrics port."""
    node = Gateway(options(tmp_path))
    await node.start()
    try:
        yield node
    finally:
        await node.stop()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    """An unsigned remoting client."""
    remoting = RemotingClient()
    try:
        yield remoting
    finally:
        await remoting.close()


def addr(node: Gateway) -> str:
    """The gateway's public remoting address."""
    return f"127.0.0.1:{node.server.port}"


def metrics_port(node: Gateway) -> int:
    """The bound metrics port, as the ready file says it."""
    return int(node.ready_info()["metrics_port"])


# ------------------------------------------------------------------ counting


async def test_requests_are_counted_and_timed_per_code(
    gateway: Gateway, client: RemotingClient
) -> None:
    registered = await client.invoke(addr(gateway), register_frame(1))
    assert registered.code == ResponseCode.SUCCESS, registered.remark
    for _ in range(3):
        found = await client.invoke(addr(gateway), route_frame("MetricsTopic1"))
        assert found.code == ResponseCode.SUCCESS
    missing = await client.invoke(addr(gateway), route_frame("NoSuchTopic"))
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    info = await client.invoke(
        addr(gateway), RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
    )
    assert info.code == ResponseCode.SUCCESS

    samples = await scrape(metrics_port(gateway))

    assert value(samples, "namesrv_requests_total", code="103") == 1
    assert value(samples, "namesrv_requests_total", code="105") == 4
    assert value(samples, "namesrv_requests_total", code="106") == 1
    assert value(samples, "namesrv_request_errors_total", code="103") == 0
    assert value(samples, "namesrv_request_errors_total", code="105") == 1
    assert value(samples, "namesrv_request_errors_total", code="106") == 0
    assert value(samples, "namesrv_request_seconds_count", code="105") == 4
    assert value(samples, "namesrv_request_seconds_bucket", code="105", le="+Inf") == 4
    assert 0 < value(samples, "namesrv_request_seconds_sum", code="103") < 5  # type: ignore[operator]
    # Codes never sent have no series at all.
    assert value(samples, "namesrv_requests_total", code="100") is None


async def test_unknown_codes_share_one_label_and_count_as_errors(
    gateway: Gateway, client: RemotingClient
) -> None:
    for code in (7777, 7778, 123_456):
        answer = await client.invoke(addr(gateway), RemotingCommand.request(code))
        assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    samples = await scrape(metrics_port(gateway))
    assert value(samples, "namesrv_requests_total", code=OTHER_CODE) == 3
    assert value(samples, "namesrv_request_errors_total", code=OTHER_CODE) == 3
    assert not any(
        labels == frozenset({("code", str(c))})
        for (_name, labels) in samples
        for c in (7777, 7778, 123_456)
    )


async def test_acl_refusals_are_counted_by_reason_and_as_errors(
    gateway: Gateway, client: RemotingClient
) -> None:
    put = RemotingCommand.request(
        RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v"}
    )
    refused = await client.invoke(addr(gateway), put)
    assert refused.code == ResponseCode.NO_PERMISSION
    signed = RemotingClient(credentials=ADMIN)
    try:
        accepted = await signed.invoke(addr(gateway), put)
    finally:
        await signed.close()
    assert accepted.code == ResponseCode.SUCCESS, accepted.remark

    samples = await scrape(metrics_port(gateway))

    assert total(samples, "namesrv_acl_refusals_total") == 1
    assert value(samples, "namesrv_acl_refusals_total", reason="unsigned") == 1
    assert value(samples, "namesrv_acl_refusals_total", reason="bad-signature") == 0
    assert value(samples, "namesrv_requests_total", code="100") == 2
    assert value(samples, "namesrv_request_errors_total", code="100") == 1


async def test_scans_and_what_they_expire_are_counted(
    gateway: Gateway, client: RemotingClient
) -> None:
    for index in (1, 2):
        answer = await client.invoke(addr(gateway), register_frame(index))
        assert answer.code == ResponseCode.SUCCESS
    before = await scrape(metrics_port(gateway))
    assert value(before, "namesrv_live_brokers") == 2
    assert value(before, "namesrv_topics") == 4

    internal = f"127.0.0.1:{gateway.internal_server.port}"
    far_future_ms = str(2**50)
    for now_ms in (None, far_future_ms):
        fields = {"secret": SECRET} | ({} if now_ms is None else {"now_ms": now_ms})
        scan = RemotingCommand.request(InternalCode.SCAN_NOT_ACTIVE_BROKER, fields)
        answer = await client.invoke(internal, scan)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
    await asyncio.sleep(gateway.metrics.collector.sample_ttl_s)  # type: ignore[union-attr]

    after = await scrape(metrics_port(gateway))

    assert value(after, "namesrv_scan_runs_total") == 2
    assert value(after, "namesrv_scan_expired_total") == 2
    assert value(after, "namesrv_scan_failures_total") == 0
    assert value(after, "namesrv_live_brokers") == 0
    # The internal port is not the public one: its requests are not counted.
    assert (
        value(after, "namesrv_requests_total", code=str(InternalCode.SCAN_NOT_ACTIVE_BROKER))
        is None
    )


async def test_eventual_mode_has_node_gauges_and_no_raft_gauges(gateway: Gateway) -> None:
    samples = await scrape(metrics_port(gateway))
    assert value(samples, "namesrv_node_info", node_id="n1", mode="eventual") == 1
    assert value(samples, "namesrv_live_brokers") == 0
    assert value(samples, "namesrv_topics") == 0
    assert not any(name.startswith("namesrv_raft_") for name, _labels in samples)


def test_the_client_view_fingerprint_is_equal_where_clients_get_equal_answers() -> None:
    """Two eventual nodes: equal tables, equal fingerprints; a KV entry only one of them
    has tells them apart until the other has it too."""
    from gateway.metric_families import sample_node, view_fingerprint
    from raftstore import commands as cmd

    first, second = LocalReplicator("n1"), LocalReplicator("n2")
    empty = sample_node(first).view_fingerprint
    assert empty == sample_node(second).view_fingerprint > 0
    assert empty == view_fingerprint(first.status().view_digest) < 2**52
    put = cmd.PutKV("ORDER_TOPIC_CONFIG", "OnlyOnN1", "broker-a:4")
    first.apply_now(put)
    assert sample_node(first).view_fingerprint != sample_node(second).view_fingerprint
    second.apply_now(put)
    assert sample_node(first).view_fingerprint == sample_node(second).view_fingerprint


def test_only_known_request_codes_get_their_own_label() -> None:
    metrics = GatewayMetrics(LocalReplicator("n1"))
    assert metrics.meter(105) is metrics.meter(105)
    assert metrics.meter(99_999) is metrics.meter(-1)
    assert metrics.meter(99_999) is not metrics.meter(105)
    assert 99_999 not in KNOWN_CODES and 105 in KNOWN_CODES


async def test_gateways_in_one_process_keep_separate_registries(tmp_path: Path) -> None:
    first = Gateway(options(tmp_path / "a", node_id="a"))
    second = Gateway(options(tmp_path / "b", node_id="b"))
    assert first.metrics is not None and second.metrics is not None
    assert first.metrics.registry is not second.metrics.registry


# ------------------------------------------------------------------ the HTTP port


async def test_the_http_port_answers_metrics_only(gateway: Gateway) -> None:
    port = metrics_port(gateway)
    status, _h, _b = await http_request(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 404
    status, _h, _b = await http_request(port, b"GET /metrics/x HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 404
    status, headers, _b = await http_request(port, b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 405 and headers["allow"] == "GET"
    status, _h, _b = await http_request(port, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 405
    status, _h, _b = await http_request(port, b"nonsense\r\n\r\n")
    assert status == 400
    # HTTP/1.1 requires Host.
    status, _h, _b = await http_request(port, b"GET /metrics HTTP/1.1\r\n\r\n")
    assert status == 400
    huge = b"GET /metrics HTTP/1.1\r\nX-Filler: " + b"a" * 20_000 + b"\r\n\r\n"
    status, _h, _b = await http_request(port, huge)
    assert status == 431
    status, headers, body = await http_request(port, b"GET /metrics?x=1 HTTP/1.0\r\n\r\n")
    assert status == 200 and b"namesrv_node_info" in body
    assert headers["connection"] == "close"


async def test_openmetrics_is_served_when_asked_for(gateway: Gateway) -> None:
    status, headers, body = await http_request(
        metrics_port(gateway),
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n"
        b"Accept: application/openmetrics-text; version=1.0.0\r\n\r\n",
    )
    assert status == 200
    assert headers["content-type"].startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n")


async def test_the_metrics_port_binds_the_gateway_host_and_goes_with_the_gateway(
    tmp_path: Path,
) -> None:
    node = Gateway(options(tmp_path))
    await node.start()
    port = metrics_port(node)
    assert node.metrics_server is not None and node.metrics_server.host == "127.0.0.1"
    await scrape(port)
    await node.stop()
    with pytest.raises(OSError):
        await http_request(port, b"GET /metrics HTTP/1.1\r\n\r\n")


async def test_without_a_metrics_port_nothing_is_counted_or_served(tmp_path: Path) -> None:
    node = Gateway(options(tmp_path, metrics_port=0))
    assert node.metrics is None and node.metrics_server is None
    assert node.server.handler == node._handle
    await node.start()
    try:
        assert "metrics_port" not in node.ready_info()
    finally:
        await node.stop()


def test_the_metrics_host_defaults_to_the_gateway_host_but_never_a_wildcard() -> None:
    assert metrics_bind_host(None, "10.0.0.5") == "10.0.0.5"
    assert metrics_bind_host(None, "0.0.0.0") == "127.0.0.1"
    assert metrics_bind_host(None, "::") == "127.0.0.1"
    assert metrics_bind_host("0.0.0.0", "127.0.0.1") == "0.0.0.0"


# ------------------------------------------------------------------ raft mode


async def test_three_raft_gateways_show_one_leader_and_their_raft_state(tmp_path: Path) -> None:
    replicators = InProcessCluster(tmp_path / "raft", propose_timeout_s=3.0).nodes
    nodes = [
        Gateway(
            options(tmp_path / f"n{i}", node_id=f"n{i}", mode=MODE_RAFT),
            replicator=replicator,
        )
        for i, replicator in enumerate(replicators)
    ]
    await asyncio.gather(*(node.start() for node in nodes))
    remoting = RemotingClient()
    try:
        scraped = await _agreed(nodes)
        leader = next(
            n for n, s in zip(nodes, scraped, strict=True) if value(s, "namesrv_raft_is_leader")
        )
        answer = await remoting.invoke(addr(leader), register_frame(1), timeout_s=8.0)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        # The broker's copy to a follower: already applied, answered from state.
        follower = next(n for n in nodes if n is not leader)
        answer = await remoting.invoke(addr(follower), register_frame(1), timeout_s=8.0)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        await asyncio.sleep(leader.metrics.collector.sample_ttl_s)  # type: ignore[union-attr]
        after = await scrape(metrics_port(leader))
        settled = await scrape(metrics_port(follower))
    finally:
        await remoting.close()
        await asyncio.gather(*(node.stop() for node in nodes))

    assert sum(value(s, "namesrv_raft_is_leader") or 0 for s in scraped) == 1
    assert {value(s, "namesrv_raft_leader_known") for s in scraped} == {1}
    assert len({value(s, "namesrv_raft_term") for s in scraped}) == 1
    for samples in scraped:
        for name in ("namesrv_raft_commit_index", "namesrv_raft_applied_index"):
            assert value(samples, name) is not None
        assert value(samples, "namesrv_raft_apply_lag") is not None
        assert value(samples, "namesrv_live_brokers") is not None
    assert value(after, "namesrv_requests_total", code="103") == 1
    assert value(after, "namesrv_live_brokers") == 1
    assert value(after, "namesrv_raft_applied_index") >= 1  # type: ignore[operator]
    assert value(after, "namesrv_node_info", node_id=leader.options.node_id, mode="raft") == 1
    assert value(after, "namesrv_raft_registrations_total", outcome="proposed") == 1
    assert value(settled, "namesrv_raft_registrations_total", outcome="proposed") == 0
    assert value(settled, "namesrv_raft_registrations_total", outcome="answered_from_state") == 1
    assert value(settled, "namesrv_raft_registration_waits_timed_out_total") == 0
    # One table everywhere: one fingerprint, and not the empty table's.
    fingerprint = value(after, "namesrv_client_view_fingerprint")
    assert fingerprint == value(settled, "namesrv_client_view_fingerprint")
    assert {value(s, "namesrv_client_view_fingerprint") for s in scraped} - {fingerprint}


async def _agreed(nodes: list[Gateway]) -> list[Samples]:
    """Scrape every node until they agree on one leader and one term."""
    seen: dict[str, object] = {}

    async def agreed() -> list[Samples] | None:
        scraped = [await scrape(metrics_port(node)) for node in nodes]
        seen["leaders"] = leaders = sum(value(s, "namesrv_raft_is_leader") or 0 for s in scraped)
        known = {value(s, "namesrv_raft_leader_known") for s in scraped}
        seen["terms"] = terms = {value(s, "namesrv_raft_term") for s in scraped}
        return scraped if leaders == 1 and known == {1} and len(terms) == 1 else None

    return await eventually(
        agreed,
        what=lambda: f"an agreed leader ({seen['leaders']} leaders, terms {seen['terms']})",
        timeout_s=LEADER_TIMEOUT_S,
        interval_s=0.2,
    )
