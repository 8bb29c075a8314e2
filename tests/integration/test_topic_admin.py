"""One way to change topics: the REST API and ``manage.py topic`` go through the real
brokers first, then every NameServer, in both modes.

One launched cluster per mode (``cluster up --demo``: three nodes, broker-a and broker-b
with a master and a slave each, all real processes) serves every test of the module.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker_app.config import BrokerConfig
from localcluster import broker_control
from namesrv_app.topic_admin import broker_topics
from remoting.codes import ResponseCode
from tests.integration.cluster_fixtures import (
    CLI_TIMEOUT_S,
    PROJECT_DIR,
    WEB_TIMEOUT_S,
    create_operator,
    query_route,
    remoting_addr,
    start_cluster,
    stop_cluster,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.integration]

NODES = 3
GROUPS = ("broker-a", "broker-b")
QUEUE_NUMS = 4
REGISTER_PERIOD_S = BrokerConfig(store_dir=Path(".")).effective_register_period_ms / 1000
PAST_REGISTRATION_S = REGISTER_PERIOD_S + 15
"""One full registration period of every broker, with slack for a loaded 2-core machine."""
WAIT_S = 20.0
LIFECYCLE_TOPIC = "RestLifecycle"
CONTROL_TOPIC = "RestNamesrvOnly"


@dataclass
class Cluster:
    """A launched cluster, its operator's API token and where things answer."""

    mode: str
    summary: dict[str, Any]
    run_dir: Path
    token: str

    @property
    def nodes(self) -> list[str]:
        """Every node's remoting address."""
        return [remoting_addr(self.summary, index) for index in range(NODES)]

    @property
    def brokers(self) -> dict[str, str]:
        """The demo brokers: label -> remoting address."""
        return {b["label"]: b["addr"] for b in self.summary["brokers"]}

    def rest(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """``method path`` on n1's API with the operator's token: status, JSON."""
        base = f"http://127.0.0.1:{self.summary['nodes'][0]['web_port']}"
        request = urllib.request.Request(
            base + path,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Token {self.token}", "Content-Type": "application/json"},
            method=method,
        )
        try:
            with urllib.request.urlopen(request, timeout=WEB_TIMEOUT_S + 15) as response:
                return int(response.status), json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            return int(exc.code), json.loads(exc.read() or b"null")

    def create(self, topic: str, groups: tuple[str, ...] = GROUPS) -> tuple[int, Any]:
        """POST a topic on ``groups``, method left to its default."""
        queues = [
            {
                "broker_name": group,
                "read_queue_nums": QUEUE_NUMS,
                "write_queue_nums": QUEUE_NUMS,
                "perm": 6,
            }
            for group in groups
        ]
        return self.rest("POST", "/api/v1/topics/", {"topic": topic, "queue_datas": queues})


@pytest.fixture(scope="module", params=["eventual", "raft"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: Any) -> Iterator[Cluster]:
    mode = str(request.param)
    run_dir = tmp_path_factory.mktemp(f"topic-admin-{mode}") / "run"
    try:
        summary = start_cluster(run_dir, "--demo", "--mode", mode, nodes=NODES)
        token = create_operator(run_dir, "topic-ops", token=True)
        ready = Cluster(mode, summary, run_dir, token)
        # The console knows each group's master once the demo topics are routed.
        wait_until(
            lambda: ready.rest("GET", "/api/v1/topics/TopicTest/")[1].get("brokers") == 2,
            what="the demo brokers in n1's projection",
            timeout_s=WAIT_S * 3,
        )
        yield ready
    finally:
        stop_cluster(run_dir)


def served_by(addr: str, topic: str) -> set[str] | None:
    """The broker groups ``topic`` has queues on at one node; None for TOPIC_NOT_EXIST."""
    code, route = query_route(addr, topic)
    if code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert code == ResponseCode.SUCCESS and route is not None, code
    return {queue.broker_name for queue in route.queue_datas}


@dataclass
class Lifecycle:
    """LIFECYCLE_TOPIC created and deleted over REST; CONTROL_TOPIC created over REST and
    deleted NameServer-only, at the same moment."""

    created: tuple[int, Any]
    routed: dict[str, set[str] | None]
    deleted: tuple[int, Any]
    control_deleted: tuple[int, Any]
    deleted_at: float


@pytest.fixture(scope="module")
def lifecycle(cluster: Cluster) -> Lifecycle:
    created = cluster.create(LIFECYCLE_TOPIC)
    routed = {node: served_by(node, LIFECYCLE_TOPIC) for node in cluster.nodes}
    assert cluster.create(CONTROL_TOPIC)[0] == 201
    deleted = cluster.rest("DELETE", f"/api/v1/topics/{LIFECYCLE_TOPIC}/")
    control = cluster.rest("DELETE", f"/api/v1/topics/{CONTROL_TOPIC}/?method=namesrv")
    return Lifecycle(created, routed, deleted, control, time.monotonic())


def test_a_rest_create_goes_through_the_masters_and_is_in_every_nodes_route(
    cluster: Cluster, lifecycle: Lifecycle
) -> None:
    status, body = lifecycle.created
    assert status == 201, body
    masters = {cluster.brokers["broker-a-0"], cluster.brokers["broker-b-0"]}
    assert {(b["addr"], b["done"]) for b in body["brokers"]} == {(m, True) for m in masters}
    assert all(node["ok"] for node in body["nodes"]), body
    assert lifecycle.routed == {node: set(GROUPS) for node in cluster.nodes}


def test_a_rest_delete_reaches_every_broker_then_every_node(
    cluster: Cluster, lifecycle: Lifecycle
) -> None:
    status, body = lifecycle.deleted
    assert status == 200, body
    assert body["ok"] is True
    assert {b["addr"] for b in body["brokers"] if b["done"]} == set(cluster.brokers.values())
    assert body["nodes"] and all(node["ok"] for node in body["nodes"]), body
    assert body["replicated"] is (cluster.mode == "raft")
    for node in cluster.nodes:
        assert served_by(node, LIFECYCLE_TOPIC) is None, node
    for addr in cluster.brokers.values():
        assert LIFECYCLE_TOPIC not in broker_topics(addr), addr


def test_a_rest_deleted_topic_stays_gone_after_the_brokers_next_registrations(
    cluster: Cluster, lifecycle: Lifecycle
) -> None:
    assert lifecycle.control_deleted[0] == 200, lifecycle.control_deleted

    # The NameServer-only delete comes back with both masters' next full registrations:
    # proof those registrations arrived; the topic deleted through the brokers does not.
    def control_back() -> bool:
        return all(served_by(node, CONTROL_TOPIC) == set(GROUPS) for node in cluster.nodes)

    left_s = lifecycle.deleted_at + PAST_REGISTRATION_S - time.monotonic()
    wait_until(
        control_back, what=f"{CONTROL_TOPIC} back on every node", timeout_s=max(left_s, WAIT_S)
    )
    for node in cluster.nodes:
        assert served_by(node, LIFECYCLE_TOPIC) is None, f"{LIFECYCLE_TOPIC} came back on {node}"


def test_deleting_a_topic_no_node_routes_and_no_broker_holds_answers_404(
    cluster: Cluster,
) -> None:
    status, body = cluster.rest("DELETE", "/api/v1/topics/NoSuchTopic/")
    assert status == 404, body
    assert "No topic NoSuchTopic" in body["detail"]


def test_a_delete_a_stopped_slave_misses_answers_207_naming_it(cluster: Cluster) -> None:
    topic = "RestPartlyDeleted"
    assert cluster.create(topic)[0] == 201
    stuck = next(
        b for b in broker_control.local_brokers(cluster.run_dir) if b.spec.label == "broker-b-1"
    )
    assert stuck.pid is not None
    os.kill(stuck.pid, signal.SIGSTOP)
    try:
        status, body = cluster.rest("DELETE", f"/api/v1/topics/{topic}/")
        # Read while the slave is still stopped: once it runs again, a copy of the topic
        # it still holds would come back with its next registration (the 207 says so).
        routes = {node: served_by(node, topic) for node in cluster.nodes}
    finally:
        os.kill(stuck.pid, signal.SIGCONT)
    assert status == 207, body
    assert body["ok"] is False and body["partial"] is True
    missed = [b for b in body["brokers"] if not b["done"]]
    assert [(b["addr"], b["group"]) for b in missed] == [(stuck.spec.addr, "broker-b")], body
    assert f"FAILED on broker broker-b ({stuck.spec.addr})" in body["detail"]
    assert all(node["ok"] for node in body["nodes"]), body
    assert routes == {node: None for node in cluster.nodes}


def topic_cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py topic ARGS --run-dir RUN``, as an operator types it."""
    return subprocess.run(
        [sys.executable, "manage.py", "topic", *args, "--run-dir", str(cluster.run_dir)],
        cwd=PROJECT_DIR,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def test_the_cli_creates_and_deletes_a_topic_through_the_brokers(cluster: Cluster) -> None:
    topic = "CliTopic"
    master = cluster.brokers["broker-a-0"]
    created = topic_cli(cluster, "create", topic, "--brokers", "broker-a")
    assert created.returncode == 0, created.stdout + created.stderr
    assert f"Created topic {topic} on the masters of broker-a ({master})" in created.stdout
    assert f"broker broker-a ({master}): done" in created.stdout
    for node in cluster.nodes:
        assert served_by(node, topic) == {"broker-a"}, node
    # Once n1's projection has it, the same create again says that nothing changed.
    wait_until(
        lambda: cluster.rest("GET", f"/api/v1/topics/{topic}/")[0] == 200,
        what=f"{topic} in n1's projection",
        timeout_s=WAIT_S,
    )
    again = topic_cli(cluster, "create", topic, "--brokers", "broker-a")
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.startswith(
        f"Topic {topic} already exists on broker-a with these settings; nothing changed. "
        f"The masters of broker-a ({master}) have it"
    ), again.stdout
    listed = topic_cli(cluster, "list", "--search", topic).stdout.splitlines()
    assert listed[1].split()[:3] == [topic, "normal", "broker-a"], listed

    deleted = topic_cli(cluster, "delete", topic)
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    assert f"Deleted topic {topic} on brokers" in deleted.stdout
    for node in cluster.nodes:
        assert served_by(node, topic) is None, node
    assert topic not in broker_topics(master)
    # The shared database has each change, as the shell's account on the node acted through.
    status, log = cluster.rest("GET", "/api/v1/audit/")
    assert status == 200, log
    cli = [(e["action"], e["node_id"], e["ok"]) for e in log["results"] if e["target"] == topic]
    assert cli == [
        ("topic delete", "n1", True),
        ("topic create", "n1", True),
        ("topic create", "n1", True),
    ], log
