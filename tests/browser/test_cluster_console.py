"""A launched cluster seen through the console in headless Chromium.

``cluster up --nodes 3 --demo``: three eventual nodes (gateway, web, Celery worker
and beat, Redis) and the real demo brokers, broker-a and broker-b, a master and a
slave each. The console of n1 is driven as an operator would drive it:

* the Overview's badge stays "nodes agree" for a minute of a healthy cluster (each
  node stamps heartbeats with its own clock; nothing a client sees differs), no
  broker flickers to "expiring", and the live feed shows no divergence;
* an asymmetric partition, as in the experiments: a fourth broker reaches n1 and n3
  directly and n2 through a ``tools.faultproxy`` link that is then blackholed (no
  FIN; n2 only notices by the broker's silence). n2 expires the broker, the badge
  turns to "nodes disagree" and the feed says so within one comparison period after
  the expiry, and the badge comes back once the link heals and the broker's next
  forced registration reaches n2;
* a topic created through the brokers and deleted (brokers first, then every
  NameServer) is on every node and then gone from every node and every broker, and
  stays gone past the brokers' next periodic registrations, while a topic deleted on
  the NameServers only comes back with them; a broker that does not answer the delete
  is named in a warning;
* a consumer group made on both masters (a client's heartbeat, sends, committed
  offsets) shows on the Brokers page with its clients and its lag per queue.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker_app.config import BrokerConfig
from broker_app.messages import build_send_request
from localcluster import broker_control
from localcluster.launcher import free_port
from localcluster.run_secrets import read_run_secrets
from remoting.blocking import BlockingClient
from remoting.bodies import decode_topic_config_serialize_wrapper
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.browser.conftest import log_in, screenshot
from tests.integration.cluster_fixtures import (
    PROJECT_DIR,
    create_operator,
    query_route,
    remoting_addr,
    start_cluster,
    stop_cluster,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.integration]

NODES = 3
OPERATOR = "console-ops"
OPERATOR_PASSWORD = "cluster-console-password-1"
SCAN_INTERVAL_S = 5
"""The cluster's scan period, which is also its comparison (divergence check) period."""
HEALTHY_WATCH_S = 60.0
SAMPLE_EVERY_S = 2.0
RELOAD_EVERY_S = 15.0
SETTLE_TIMEOUT_S = 60.0
PARTITIONED_BROKER = "broker-p"
# The broker's heartbeat timeout (the demo settings: 3 s), a scan to notice it, one
# comparison period to report it, and slack for a loaded 2-core machine.
DIVERGENCE_TIMEOUT_S = 3 + 2 * SCAN_INTERVAL_S + 15
REGISTER_PERIOD_S = BrokerConfig(store_dir=Path(".")).effective_register_period_ms / 1000
HEAL_TIMEOUT_S = REGISTER_PERIOD_S + 30
PAST_REGISTRATION_S = REGISTER_PERIOD_S + 5
TOPIC = "LifecycleTopic"
CONTROL_TOPIC = "NamesrvOnlyDeleted"
GROUPS = ("broker-a", "broker-b")
WAIT_S = 20.0
PAGE_TIMEOUT_MS = 30_000


@dataclass
class Cluster:
    summary: dict[str, Any]
    run_dir: Path

    @property
    def nodes(self) -> list[str]:
        return [remoting_addr(self.summary, index) for index in range(NODES)]

    @property
    def console_url(self) -> str:
        return f"http://127.0.0.1:{self.summary['nodes'][0]['web_port']}"

    @property
    def brokers(self) -> dict[str, str]:
        """The demo brokers: label -> remoting address."""
        return {b["label"]: b["addr"] for b in self.summary["brokers"]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    run_dir = tmp_path_factory.mktemp("cluster-console") / "run"
    try:
        summary = start_cluster(
            run_dir, "--demo", nodes=NODES, env={"NAMESRV_SCAN_INTERVAL_S": str(SCAN_INTERVAL_S)}
        )
        create_operator(run_dir, OPERATOR, password=OPERATOR_PASSWORD)
        yield Cluster(summary, run_dir)
    finally:
        stop_cluster(run_dir)


@pytest.fixture
def console(browser: Any, cluster: Cluster) -> Iterator[Any]:
    """A tab on n1's console, logged in as the operator."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        yield log_in(context.new_page(), cluster.console_url, OPERATOR, OPERATOR_PASSWORD)
    finally:
        context.close()


def served_by(addr: str, topic: str) -> set[str] | None:
    """The broker groups ``topic`` has queues on at one node; None for TOPIC_NOT_EXIST."""
    code, route = query_route(addr, topic)
    if code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert code == ResponseCode.SUCCESS and route is not None, code
    return {queue.broker_name for queue in route.queue_datas}


def broker_topics(addr: str) -> set[str]:
    """GET_ALL_TOPIC_CONFIG of one broker: the names in its topic table."""
    with BlockingClient(addr, timeout_s=5.0) as client:
        response = client.invoke(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
    assert response.code == ResponseCode.SUCCESS and response.body is not None
    return set(decode_topic_config_serialize_wrapper(response.body).topic_config_table)


# ------------------------------------------------------------------ the badge


def badge(tab: Any) -> str:
    return str(tab.inner_text("#divergence-badge"))


def divergence_lines(tab: Any) -> list[str]:
    return [str(t) for t in tab.locator("#event-list li.divergence").all_inner_texts()]


def expiring(tab: Any) -> int:
    card = tab.locator("#overview-counts .card", has_text="expiring").locator("b")
    return int(card.inner_text())


def live(tab: Any) -> None:
    tab.wait_for_function("window.namesrvLive && window.namesrvLive.connected")


def badge_becomes(tab: Any, text: str, timeout_s: float) -> None:
    """Wait for the live page's badge to read ``text`` (the page refreshes it on events)."""
    tab.wait_for_function(
        "t => { const b = document.getElementById('divergence-badge'); "
        "return b !== null && b.innerText.trim() === t; }",
        arg=text,
        timeout=timeout_s * 1000,
    )


@dataclass
class Proxy:
    proc: subprocess.Popen[str]
    listen: str
    control: int

    def set_mode(self, mode: str) -> None:
        import socket

        with socket.create_connection(("127.0.0.1", self.control), timeout=5.0) as sock:
            sock.sendall(json.dumps({"link": "n2", "mode": mode}).encode() + b"\n")
            reply = json.loads(sock.makefile().readline())
        assert reply == {"ok": True}, reply


@pytest.fixture
def n2_link(cluster: Cluster) -> Iterator[Proxy]:
    """A fault-proxy process in front of n2's remoting port."""
    listen_port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tools.faultproxy",
            "--link",
            f"n2={listen_port}:{cluster.nodes[1]}",
            "--control",
            "0",
        ],
        cwd=PROJECT_DIR,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        link = json.loads(proc.stdout.readline())
        control = json.loads(proc.stdout.readline())["control"]
        yield Proxy(proc, link["listen"], control)
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def partitioned_broker(cluster: Cluster, n2_link: Proxy) -> Iterator[str]:
    """A master that dials n1 and n3 directly and n2 through the proxy; its address.

    It signs with the run's broker account and beats every second (the demo brokers'
    settings). Stopped gracefully afterwards: it unregisters from every node.
    """
    template = next(
        b for b in broker_control.local_brokers(cluster.run_dir) if b.spec.label == "broker-a-0"
    )
    nodes = cluster.nodes
    spec = broker_control.BrokerSpec(
        PARTITIONED_BROKER,
        0,
        free_port(),
        free_port(),
        (nodes[0], n2_link.listen, nodes[2]),
        settings=dict(template.spec.settings),
    )
    broker_control.start_broker(cluster.run_dir, spec)
    try:
        yield spec.addr
    finally:
        broker_control.stop_broker(cluster.run_dir, spec.label)


def test_the_badge_agrees_on_a_healthy_cluster_and_disagrees_under_an_asymmetric_partition(
    console: Any, cluster: Cluster, n2_link: Proxy, partitioned_broker: str
) -> None:
    tab = console
    live(tab)
    # The fourth broker's registration reaches the three nodes a few ms apart.
    for node in cluster.nodes:
        wait_until(
            lambda n=node: served_by(n, PARTITIONED_BROKER) == {PARTITIONED_BROKER},
            what=f"{PARTITIONED_BROKER} on {node}",
            timeout_s=WAIT_S,
        )
    badge_becomes(tab, "nodes agree", SETTLE_TIMEOUT_S)

    # A healthy minute: heartbeats every second from five brokers, stamped by three
    # clocks, a forced registration of every broker, scans and comparisons.
    samples = 0
    started = last_reload = time.monotonic()
    while time.monotonic() - started < HEALTHY_WATCH_S:
        if time.monotonic() - last_reload > RELOAD_EVERY_S:
            tab.reload()  # a fresh render too, not only the live refreshes
            live(tab)
            last_reload = time.monotonic()
        assert badge(tab) == "nodes agree", f"after {time.monotonic() - started:.0f} s"
        assert tab.locator("#nodes-table .badge", has_text="disagrees").count() == 0
        assert expiring(tab) == 0, "a healthy broker shown as expiring"
        assert divergence_lines(tab) == []
        samples += 1
        time.sleep(SAMPLE_EVERY_S)
    assert samples >= HEALTHY_WATCH_S / SAMPLE_EVERY_S / 2
    assert tab.evaluate("window.namesrvLive.heartbeats") > 0  # the feed was live all along

    # The partition: n2 stops hearing broker-p, n1 and n3 still do.
    n2_link.set_mode("blackhole")
    cut_at = time.monotonic()
    badge_becomes(tab, "nodes disagree", DIVERGENCE_TIMEOUT_S)
    tab.wait_for_selector("#event-list li.divergence", timeout=DIVERGENCE_TIMEOUT_S * 1000)
    noticed_s = time.monotonic() - cut_at
    assert served_by(cluster.nodes[1], PARTITIONED_BROKER) is None  # n2 expired it
    assert served_by(cluster.nodes[0], PARTITIONED_BROKER) == {PARTITIONED_BROKER}
    assert served_by(cluster.nodes[2], PARTITIONED_BROKER) == {PARTITIONED_BROKER}
    line = divergence_lines(tab)[0]
    assert "nodes disagree on what clients see: {n1, n3} vs {n2}" in line, line
    rows = tab.locator("#nodes-table .badge", has_text="disagrees")
    wait_until(lambda: rows.count() == NODES, what="every node row marked", timeout_s=WAIT_S)
    screenshot(tab, "overview-disagree.png")
    assert noticed_s < DIVERGENCE_TIMEOUT_S
    # The Topology page shows who holds broker-p: n1 and n3 alive, n2 absent.
    tab.goto(f"{cluster.console_url}/topology/")
    row = tab.locator("#broker-matrix tr.warn", has_text=PARTITIONED_BROKER)
    assert row.count() == 1
    cells = [row.locator("td").nth(4 + i).get_attribute("class") for i in range(NODES)]
    assert cells == ["cell-alive", "cell-absent", "cell-alive"], cells
    assert tab.locator("#broker-matrix tr.warn").count() == 1  # the demo brokers agree
    marks = tab.locator("svg.topology rect.mark.absent")
    assert marks.count() == 1 and marks.locator("title").text_content() == "n2: absent"
    screenshot(tab, "topology-disagree.png")
    tab.goto(cluster.console_url)
    live(tab)

    # Healed: the broker's next forced registration reaches n2 again.
    n2_link.set_mode("pass")
    badge_becomes(tab, "nodes agree", HEAL_TIMEOUT_S)
    assert served_by(cluster.nodes[1], PARTITIONED_BROKER) == {PARTITIONED_BROKER}


# ------------------------------------------------------------- a topic's life


def submit(tab: Any) -> tuple[int, str | None, str | None]:
    """Submit the operation form: the status, the result line and the error line."""
    with tab.expect_navigation() as navigation:
        tab.click("form button[type=submit]")
    response = navigation.value
    result = tab.locator("#operation-result")
    error = tab.locator("#operation-error")
    return (
        response.status if response is not None else 0,
        result.inner_text() if result.count() else None,
        error.inner_text() if error.count() else None,
    )


def create_topic(tab: Any, url: str, topic: str) -> tuple[int, str | None, str | None]:
    tab.goto(f"{url}/ops/register-topic/")
    tab.fill("input[name=topic]", topic)
    tab.select_option("select[name=brokers]", list(GROUPS))
    tab.fill("input[name=read_queue_nums]", "4")
    tab.fill("input[name=write_queue_nums]", "4")
    assert tab.is_checked("input[name=method][value=brokers]"), "brokers is the default method"
    return submit(tab)


def delete_topic(tab: Any, url: str, topic: str) -> tuple[int, str | None, str | None]:
    tab.goto(f"{url}/ops/delete-topic/")
    tab.fill("input[name=topic]", topic)
    tab.check("input[name=confirm]")
    return submit(tab)


def test_a_topic_deleted_in_the_console_is_gone_from_brokers_and_nodes_for_good(
    console: Any, cluster: Cluster
) -> None:
    tab, url, nodes, brokers = console, cluster.console_url, cluster.nodes, cluster.brokers
    assert sorted(brokers) == ["broker-a-0", "broker-a-1", "broker-b-0", "broker-b-1"]
    masters = [brokers["broker-a-0"], brokers["broker-b-0"]]

    for topic in (TOPIC, CONTROL_TOPIC):
        status, result, error = create_topic(tab, url, topic)
        assert (status, error) == (200, None), error
        assert result is not None and f"Created topic {topic}" in result, result
        assert all(addr in result for addr in masters), result
    for topic in (TOPIC, CONTROL_TOPIC):
        for node in nodes:
            wait_until(
                lambda n=node, t=topic: served_by(n, t) == set(GROUPS),
                what=f"{topic} on {node}",
                timeout_s=WAIT_S,
            )
        for addr in brokers.values():  # the slaves copy it from their masters
            wait_until(
                lambda a=addr, t=topic: t in broker_topics(a),
                what=f"{topic} on {addr}",
                timeout_s=WAIT_S,
            )
    tab.goto(f"{url}/topics/{TOPIC}/")
    assert "all nodes agree" in tab.inner_text("h1")
    queues = tab.inner_text("#queue-datas")
    assert all(group in queues for group in GROUPS), queues

    # Delete TOPIC in the console: every broker first, then every NameServer.
    status, result, error = delete_topic(tab, url, TOPIC)
    deleted_at = time.monotonic()
    assert (status, error) == (200, None), error
    assert result is not None and f"Deleted topic {TOPIC}" in result, result
    assert all(addr in result for addr in brokers.values()), result
    assert all(f"n{index + 1}" in result for index in range(NODES)), result
    screenshot(tab, "topic-deleted.png")
    for node in nodes:
        assert served_by(node, TOPIC) is None, node
    for addr in brokers.values():
        assert TOPIC not in broker_topics(addr), addr
    tab.goto(f"{url}/topics/?type=all")
    assert TOPIC not in tab.inner_text("#topic-table")

    # For contrast, what the console used to do: CONTROL_TOPIC deleted on the
    # NameServers only, with an admin signature on the wire.
    admin = read_run_secrets(cluster.run_dir).admin_credentials()
    for node in nodes:
        request = RemotingCommand.request(
            RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": CONTROL_TOPIC}
        )
        with BlockingClient(node, timeout_s=5.0, credentials=admin) as client:
            assert client.invoke(request).code == ResponseCode.SUCCESS
        assert served_by(node, CONTROL_TOPIC) is None

    # The brokers' periodic registrations are forced (forceRegister, as upstream): what
    # a broker still holds comes back on every node, what it deleted does not, past one
    # full registration period of every broker.
    for node in nodes:
        wait_until(
            lambda n=node: served_by(n, CONTROL_TOPIC) == set(GROUPS),
            what=f"{CONTROL_TOPIC} back on {node}",
            timeout_s=PAST_REGISTRATION_S,
        )
    time.sleep(max(0.0, deleted_at + PAST_REGISTRATION_S - time.monotonic()))
    for node in nodes:
        assert served_by(node, TOPIC) is None, f"{TOPIC} came back on {node}"
    for addr in brokers.values():
        assert TOPIC not in broker_topics(addr), addr

    # A broker that does not answer: the delete goes on, and the warning names it.
    stuck = next(
        b for b in broker_control.local_brokers(cluster.run_dir) if b.spec.label == "broker-b-1"
    )
    assert stuck.pid is not None
    os.kill(stuck.pid, signal.SIGSTOP)
    try:
        status, result, error = delete_topic(tab, url, CONTROL_TOPIC)
    finally:
        os.kill(stuck.pid, signal.SIGCONT)
    assert (status, result) == (207, None), result
    assert error is not None and "FAILED on broker" in error and stuck.spec.addr in error, error
    assert all(f"n{index + 1}" in error for index in range(NODES)), error
    screenshot(tab, "topic-delete-partial.png")
    for node in nodes:
        assert served_by(node, CONTROL_TOPIC) is None, node
    for addr in masters:
        assert CONTROL_TOPIC not in broker_topics(addr), addr
    # The slave that missed it copies its master's table at its next metadata sync.
    wait_until(
        lambda: CONTROL_TOPIC not in broker_topics(stuck.spec.addr),
        what="the missed slave catching up with its master",
        timeout_s=30.0,
    )


# ------------------------------------------------------------- consumer groups

CONSUMER_GROUP = "ConsoleDemoGroup"
CONSUMER_CLIENT = "127.0.0.1@console-demo"
CONSUMED_TOPIC = "DemoOrders"
RETRY_TOPIC = f"%RETRY%{CONSUMER_GROUP}"
# Per master, per (topic, queue): messages sent and the offset the group commits.
PROGRESS = {
    "broker-a": {
        (CONSUMED_TOPIC, 0): (6, 6),
        (CONSUMED_TOPIC, 1): (4, 1),
        (RETRY_TOPIC, 0): (2, 1),
    },
    "broker-b": {
        (CONSUMED_TOPIC, 0): (5, 3),
        (CONSUMED_TOPIC, 3): (2, 2),
        (RETRY_TOPIC, 0): (0, 0),
    },
}
"""Lag 3 + 1 on broker-a, 2 on broker-b; broker-b's retry queue is idle (not listed)."""


def heart_beat(client: BlockingClient) -> None:
    """HEART_BEAT as a push consumer of CONSUMER_GROUP subscribed to CONSUMED_TOPIC."""
    body = json.dumps(
        {
            "clientID": CONSUMER_CLIENT,
            "consumerDataSet": [
                {
                    "groupName": CONSUMER_GROUP,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "subscriptionDataSet": [
                        {
                            "topic": CONSUMED_TOPIC,
                            "subString": "TagA || TagB",
                            "subVersion": 1,
                            "expressionType": "TAG",
                        }
                    ],
                }
            ],
            "producerDataSet": [],
        }
    ).encode()
    request = RemotingCommand.request(RequestCode.HEART_BEAT, body=body)
    assert client.invoke(request).code == ResponseCode.SUCCESS


@pytest.fixture
def consumer_clients(cluster: Cluster) -> Iterator[list[BlockingClient]]:
    """CONSUMER_GROUP on both masters as a client makes it: a heartbeat on a connection
    kept open (the group stays online), messages sent, offsets committed (PROGRESS)."""
    clients = []
    try:
        for group, progress in PROGRESS.items():
            client = BlockingClient(cluster.brokers[f"{group}-0"], timeout_s=5.0)
            clients.append(client)
            heart_beat(client)  # first: it creates the group's retry topic
            for (topic, queue_id), (sent, committed) in progress.items():
                for n in range(sent):
                    request = build_send_request(
                        topic,
                        f"order {n}".encode(),
                        queue_id=queue_id,
                        producer_group="PG",
                        tags="TagA",
                        born_timestamp_ms=int(time.time() * 1000),
                    )
                    assert client.invoke(request).code == ResponseCode.SUCCESS, topic
                commit = RemotingCommand.request(
                    RequestCode.UPDATE_CONSUMER_OFFSET,
                    {
                        "consumerGroup": CONSUMER_GROUP,
                        "topic": topic,
                        "queueId": str(queue_id),
                        "commitOffset": str(committed),
                    },
                )
                assert client.invoke(commit).code == ResponseCode.SUCCESS
        yield clients
    finally:
        for client in clients:
            client.close()


def test_the_brokers_page_shows_each_consumer_groups_clients_and_lag(
    console: Any, cluster: Cluster, consumer_clients: list[BlockingClient]
) -> None:
    tab = console
    tab.goto(f"{cluster.console_url}/brokers/")
    # Every demo master and slave proved the run's HA secret; each slave is connected.
    expected_ha = {
        ("broker-a", "0"): "authenticated · 1 slave connected",
        ("broker-a", "1"): "authenticated · connected",
        ("broker-b", "0"): "authenticated · 1 slave connected",
        ("broker-b", "1"): "authenticated · connected",
    }
    shown: dict[tuple[str, str], str] = {}

    def ha_shown() -> bool:
        shown.clear()
        for row in tab.locator("#brokers tbody tr").all():
            cells = row.locator("td")
            broker = (cells.nth(1).inner_text(), cells.nth(2).inner_text())
            shown[broker] = row.locator("td.ha").inner_text()
        if shown == expected_ha:
            return True
        tab.reload()
        return False

    wait_until(
        ha_shown,
        what=lambda: f"the HA states {expected_ha} (shown: {shown})",
        timeout_s=15.0,
        interval_s=0.5,
    )
    screenshot(tab, "brokers.png")
    group = tab.locator(f".consumer-group[data-group='{CONSUMER_GROUP}']")
    assert group.locator(".total-lag").inner_text() == "6"
    assert "2 client connections" in group.locator("h3").inner_text()
    clients = [
        row.locator("td").all_inner_texts()
        for row in group.locator("table.consumer-clients tbody tr").all()
    ]
    assert [(broker, client_id) for broker, client_id, _, _ in clients] == [
        ("broker-a", CONSUMER_CLIENT),
        ("broker-b", CONSUMER_CLIENT),
    ]
    queues = [
        row.locator("td").all_inner_texts()
        for row in group.locator("table.consumer-queues tbody tr").all()
    ]
    expected = [
        [
            broker,
            f"{topic} retry" if topic == RETRY_TOPIC else topic,
            str(queue_id),
            str(sent),
            str(committed),
            str(sent - committed),
        ]
        for broker, progress in PROGRESS.items()
        for (topic, queue_id), (sent, committed) in progress.items()
        if topic != RETRY_TOPIC or sent > committed
    ]
    assert queues == expected
    assert "1 idle retry queue not listed" in group.locator("tfoot").inner_text()
    tab.evaluate("document.getElementById('consumer-groups').scrollIntoView()")
    screenshot(tab, "brokers-consumers.png")
