"""A real Prometheus server scrapes the metrics ports of a 3-node raft cluster.

Prometheus is Debian's package at /usr/bin/prometheus, installed with apt-get when
missing (the tests run as root in CI, as for the browser tests' Chromium). It runs
in a temporary folder on a free loopback port and scrapes every second.

The three raft gateways run in this test's event loop (real Raft ports, real
remoting and metrics ports, one RaftReplicator each), since the metrics port is an
option of :class:`~gateway.options.GatewayOptions`.

The same run checks the shipped monitoring files (deploy/, see
tests/deploy/test_monitoring_files.py): every gateway metric the alerting rules and
the Grafana dashboard name is in what the three gateways export, and Prometheus loads
the rules and evaluates each of them without an error.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.options import GatewayOptions
from gateway.server import Gateway
from localcluster.demo import DemoBroker, register_request, topic_table
from raftstore.vocab import MODE_RAFT
from remoting.client import RemotingClient
from remoting.codes import ResponseCode
from remoting.model import DataVersion
from tests.deploy.monitoring import (
    PROMETHEUS,
    PROMETHEUS_OWN,
    RULES,
    WEB_PREFIX,
    ensure_prometheus,
    rules,
    sample_names,
    used_metric_names,
)
from tests.integration.gateway_harness import write_test_acl
from tests.raftstore.raft_node import InProcessCluster
from tests.waiting import eventually
from tools.ports import free_port

pytestmark = [pytest.mark.slow, pytest.mark.integration]

START_TIMEOUT_S = 60.0
SERIES_TIMEOUT_S = 60.0
POLL_S = 0.5
HTTP_TIMEOUT_S = 5.0
NODES = 3
SCRAPE_CONFIG = """\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: namesrv
    static_configs:
      - targets: [{targets}]
rule_files: ["{rules}"]
"""


@pytest.fixture(scope="session")
def prometheus_binary() -> Path:
    """The Debian prometheus binary (:func:`tests.deploy.monitoring.ensure_prometheus`)."""
    ensure_prometheus()
    return PROMETHEUS


@pytest.fixture
async def raft_gateways(tmp_path: Path) -> AsyncIterator[list[Gateway]]:
    """Three raft gateways with metrics ports, started in this event loop."""
    replicators = InProcessCluster(tmp_path / "raft", size=NODES, propose_timeout_s=3.0).nodes
    nodes = []
    for index, replicator in enumerate(replicators):
        folder = tmp_path / f"n{index}"
        folder.mkdir()
        options = GatewayOptions(
            node_id=f"n{index}",
            port=0,
            internal_port=0,
            mode=MODE_RAFT,
            acl_file=write_test_acl(folder),
            metrics_port=free_port(),
            drain_timeout_s=1.0,
        )
        nodes.append(Gateway(options, replicator=replicator))
    await asyncio.gather(*(node.start() for node in nodes))
    try:
        yield nodes
    finally:
        await asyncio.gather(*(node.stop() for node in nodes))


class PrometheusProcess:
    """``prometheus`` on 127.0.0.1:port with ``config`` and its data in ``folder``."""

    def __init__(self, binary: Path, config: Path, port: int) -> None:
        self.port = port
        self.log = config.parent / "prometheus.log"
        argv = [
            str(binary),
            f"--config.file={config}",
            f"--storage.tsdb.path={config.parent / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(argv, cwd=config.parent, stdout=out, stderr=out)

    def get(self, path: str) -> Any:
        """GET ``path`` of the HTTP API, JSON-decoded."""
        url = f"http://127.0.0.1:{self.port}{path}"
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as answer:
            return json.loads(answer.read())

    def query(self, promql: str) -> list[dict[str, Any]]:
        """An instant query's result vector."""
        answer = self.get("/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
        assert answer["status"] == "success", answer
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def stop(self) -> None:
        """SIGTERM, then SIGKILL."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _metrics_text(target: str) -> str:
    """A gateway's exposition, as Prometheus scrapes it."""
    with urllib.request.urlopen(f"http://{target}/metrics", timeout=HTTP_TIMEOUT_S) as answer:
        text: str = answer.read().decode("utf-8")
        return text


async def _wait_for(what: str, check: Any, server: PrometheusProcess, timeout_s: float) -> Any:
    """Poll ``check()`` in a thread until it returns something truthy."""
    last: list[Any] = [None]

    async def done() -> Any:
        if server.proc.poll() is not None:
            raise AssertionError(f"prometheus exited:\n{server.log.read_text()}")
        try:
            last[0] = await asyncio.to_thread(check)
        except OSError as exc:  # not listening yet
            last[0] = exc
            return None
        return last[0]

    return await eventually(
        done, what=lambda: f"{what} (still {last[0]!r})", timeout_s=timeout_s, interval_s=POLL_S
    )


async def test_prometheus_sees_three_raft_nodes_and_exactly_one_leader(
    raft_gateways: list[Gateway], prometheus_binary: Path, tmp_path: Path
) -> None:
    config = tmp_path / "prometheus" / "prometheus.yml"
    config.parent.mkdir()
    targets = [f"127.0.0.1:{node.ready_info()['metrics_port']}" for node in raft_gateways]
    config.write_text(
        SCRAPE_CONFIG.format(targets=", ".join(f'"{t}"' for t in targets), rules=RULES)
    )
    server = PrometheusProcess(prometheus_binary, config, free_port())
    try:
        await _wait_for(
            "prometheus ready",
            lambda: server.get("/api/v1/status/buildinfo")["status"] == "success",
            server,
            START_TIMEOUT_S,
        )

        def three_terms() -> list[dict[str, Any]] | None:
            series = server.query("namesrv_raft_term")
            return series if len(series) == NODES else None

        series = await _wait_for(
            "3 namesrv_raft_term series", three_terms, server, SERIES_TIMEOUT_S
        )
        assert {s["metric"]["instance"] for s in series} == set(targets)

        def one_leader() -> bool:
            leaders = server.query("sum(namesrv_raft_is_leader)")
            known = server.query("min(namesrv_raft_leader_known)")
            terms = server.query('count(count_values("term", namesrv_raft_term))')
            return all(answer for answer in (leaders, known, terms)) and (
                float(leaders[0]["value"][1]),
                float(known[0]["value"][1]),
                float(terms[0]["value"][1]),
            ) == (1, 1, 1)

        await _wait_for("one leader", one_leader, server, SERIES_TIMEOUT_S)
        ups = server.query("up")
        assert sorted(float(s["value"][1]) for s in ups) == [1.0] * NODES

        # A registration through the leader shows up as a counted request on its node.
        leader = next(
            node
            for node in raft_gateways
            if node.replicator.status().state == "leader"  # the agreed leader just seen
        )
        client = RemotingClient()
        try:
            broker = DemoBroker("PromCluster", "broker-p", 0, "127.0.0.1:30911", "127.0.0.1:30912")
            frame = register_request(
                broker, topic_table(["PromTopic", "broker-p"]), DataVersion(timestamp=1, counter=1)
            )
            answer = await client.invoke(f"127.0.0.1:{leader.server.port}", frame, timeout_s=8.0)
        finally:
            await client.close()
        assert answer.code == ResponseCode.SUCCESS, answer.remark

        def registered() -> bool:
            counted = server.query('sum(namesrv_requests_total{code="103"})')
            live = server.query("min(namesrv_live_brokers)")
            return (
                bool(counted)
                and float(counted[0]["value"][1]) == 1
                and bool(live)
                and float(live[0]["value"][1]) == 1
            )

        await _wait_for("the registration counted and replicated", registered, server, 30.0)

        # Every gateway metric the shipped rules and dashboard name is exported (the
        # registration above made the per-code request series exist).
        texts = await asyncio.gather(
            *(asyncio.to_thread(_metrics_text, target) for target in targets)
        )
        exposed = set().union(*(sample_names(text) for text in texts))
        named = {
            name for name in used_metric_names() - PROMETHEUS_OWN if not name.startswith(WEB_PREFIX)
        }
        assert named <= exposed, sorted(named - exposed)

        # Prometheus loaded every rule and evaluated each without an error.
        def rules_evaluated() -> list[dict[str, Any]] | None:
            groups = server.get("/api/v1/rules")["data"]["groups"]
            loaded = [rule for group in groups for rule in group["rules"]]
            evaluated = all(rule.get("lastEvaluation", "").startswith("2") for rule in loaded)
            return loaded if loaded and evaluated else None

        loaded = await _wait_for("the rules evaluated", rules_evaluated, server, 10.0)
        assert [rule["name"] for rule in loaded] == [rule["alert"] for rule in rules()]
        assert {(rule["name"], rule["health"], rule.get("lastError", "")) for rule in loaded} == {
            (rule["name"], "ok", "") for rule in loaded
        }
    finally:
        server.stop()
