"""Third-party producers and consumers through our NameServers against ``broker_app``.

For each mode (eventual and raft), three launched nodes and real brokers (broker-a:
master + slave, broker-b: master; :mod:`tests.interop.consume_cluster`). The clients
are ali-ons 3.12.0 (its Producer and MQPushConsumer, driven by
``ali_ons_consume_driver.js``) and rocketmq-client-cpp 1.0.1 (PyPI ``rocketmq``, its
Producer and PushConsumer, ``rocketmq_cpp_consume_driver.py``). Each test uses its own
topic and consumer group, so its counts are its own:

* every message sent is received exactly once per group (a message the handler asked
  to retry comes once more, from ``%RETRY%group``, with reconsumeTimes 1; one sent back
  with no reconsume left ends in ``%DLQ%group``);
* three clients of a group hold the queues as AllocateMessageQueueAveragely assigns
  them, and the two left take the third one's queues when it leaves;
* with broker-a's master killed (SIGKILL, its slave in sync), new groups of both
  clients still read every message: from the slave in eventual mode (the route
  keeps only broker id 1), from the promoted slave in raft mode (the NameServers
  elect it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker_app.clients import QueueKey, dlq_topic
from broker_app.consumer import allocate_averagely
from localcluster import broker_control
from localcluster.lifecycle import stop_brokers
from remoting.blocking import BlockingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.integration.cluster_fixtures import PROJECT_DIR, stop_cluster
from tests.interop.consume_cluster import ConsumeCluster, start_consume_cluster
from tests.waiting import wait_until
from tools.interop_setup import InteropClients

pytestmark = [pytest.mark.interop, pytest.mark.slow]

ALI_DRIVER = Path(__file__).with_name("ali_ons_consume_driver.js")
CPP_DRIVER = Path(__file__).with_name("rocketmq_cpp_consume_driver.py")
DRIVER_TIMEOUT_S = 120
SYNC_TIMEOUT_S = 15.0


@pytest.fixture(scope="module", params=["eventual", "raft"])
def cluster(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    interop_clients: InteropClients,
) -> Iterator[ConsumeCluster]:
    run_dir = tmp_path_factory.mktemp(f"consume-{request.param}")
    started = start_consume_cluster(run_dir, request.param)
    try:
        yield started
    finally:
        stop_brokers(run_dir)
        stop_cluster(run_dir)


def events(output: str, kind: str) -> list[dict[str, Any]]:
    """The driver's JSON lines of one kind."""
    found = []
    for line in output.splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("event") == kind:
                found.append(event)
    return found


def run_ali(clients: InteropClients, scenario: dict[str, Any]) -> str:
    done = subprocess.run(
        [clients.node_executable, str(ALI_DRIVER), json.dumps(scenario)],
        env={**os.environ, "NODE_PATH": str(clients.node_modules)},
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"ali-ons driver failed:\n{done.stdout[-3000:]}\n{done.stderr}"
    return done.stdout


def run_cpp(clients: InteropClients, scenario: dict[str, Any]) -> str:
    done = subprocess.run(
        [str(clients.python_executable), str(CPP_DRIVER), json.dumps(scenario)],
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"cpp driver failed:\n{done.stdout[-3000:]}\n{done.stderr}"
    return done.stdout


def max_offset(addr: str, topic: str, queue_id: int) -> int:
    """GET_MAX_OFFSET of one queue on one broker."""
    with BlockingClient(addr, timeout_s=5.0) as client:
        answer = client.invoke(
            RemotingCommand.request(
                RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)}
            )
        )
    assert answer.code == ResponseCode.SUCCESS
    return int((answer.ext_fields or {})["offset"])


def test_ali_ons_receives_every_message_once_and_retries_go_through_retry_and_dlq(
    cluster: ConsumeCluster, interop_clients: InteropClients
) -> None:
    topic, group = f"AliOnce-{cluster.mode}", f"ali-once-{cluster.mode}"
    cluster.create_topic(topic)
    out = run_ali(
        interop_clients,
        {
            "namesrv": cluster.namesrv,
            "topic": topic,
            "group": group,
            "send": 100,
            "prefix": "m",
            "consumers": ["c1"],
            "expect": 100,
            "timeoutMs": 60_000,
            "holdMs": 3_000,
            "retryOnce": ["m-7"],
        },
    )
    sent = events(out, "sent")
    assert len(sent) == 100 and {e["status"] for e in sent} == {"SEND_OK"}
    received = events(out, "received")
    counts = Counter(e["body"] for e in received)
    assert set(counts) == {f"m-{i}" for i in range(100)}, "no message is lost"
    twice = {body: n for body, n in counts.items() if n != 1}
    assert twice == {"m-7": 2}, "only the retried message comes again"
    retried = [e for e in received if e["body"] == "m-7"]
    assert [e["reconsumeTimes"] for e in retried] == [0, 1]
    assert retried[1]["topic"] == topic, "the retry is handed over under its own topic"

    # The dead-letter case. ali-ons acknowledges a message that came back from the
    # retry topic whatever its handler answers (its %RETRY% subscription wraps the
    # handler and drops its answer), so a message reaches the DLQ from ali-ons only
    # with maxReconsumeTimes 0: the broker then dead-letters the first send-back.
    dead_group = f"ali-dead-{cluster.mode}"
    dead_out = run_ali(
        interop_clients,
        {
            "namesrv": cluster.namesrv,
            "topic": topic,
            "group": dead_group,
            "send": 0,
            "prefix": "m",
            "consumers": ["c1"],
            "expect": 99,
            "timeoutMs": 60_000,
            "holdMs": 3_000,
            "alwaysRetry": ["m-9"],
            "maxReconsumeTimes": 0,
        },
    )
    dead_counts = Counter(e["body"] for e in events(dead_out, "received"))
    assert dead_counts == Counter({f"m-{i}": 1 for i in range(100)})
    dead = sum(
        max_offset(cluster.brokers[label].addr, dlq_topic(dead_group), 0)
        for label in ("broker-a-0", "broker-b-0")
    )
    assert dead == 1, "m-9 is in the group's dead-letter queue"


def test_rocketmq_cpp_producer_and_push_consumer(
    cluster: ConsumeCluster, interop_clients: InteropClients
) -> None:
    topic, group = f"CppOnce-{cluster.mode}", f"cpp-once-{cluster.mode}"
    cluster.create_topic(topic)
    out = run_cpp(
        interop_clients,
        {
            "namesrv": ";".join(cluster.namesrv),
            "topic": topic,
            "group": group,
            "send": 50,
            "prefix": "c",
            "expect": 50,
            "timeout_s": 60,
            "hold_s": 4,
        },
    )
    sent = events(out, "sent")
    assert len(sent) == 50 and {e["status"] for e in sent} == {0}, "SEND_OK"
    counts = Counter(e["body"] for e in events(out, "received"))
    assert set(counts) == {f"c-{i}" for i in range(50)}, "every message arrives"
    # A send the client gave up on and the driver sent again (rare, seen once under
    # load) may arrive twice; every other message arrives exactly once.
    retried = {e["body"] for e in events(out, "send_retry")}
    assert len(retried) <= 2, f"sends retried: {sorted(retried)}"
    assert {body for body, n in counts.items() if n != 1} <= retried, counts
    assert {e["topic"] for e in events(out, "received")} == {topic}


def test_an_orderly_cpp_consumer_locks_its_queues_and_reads_each_in_order(
    cluster: ConsumeCluster, interop_clients: InteropClients, tmp_path: Path
) -> None:
    """rocketmq-client-cpp's orderly PushConsumer locks every queue it consumes with
    LOCK_BATCH_MQ (41); while it holds them another client of the group gets none, and
    each queue's messages arrive in queue order (the topic lives on broker-a only, so a
    queue id names one queue)."""
    topic, group = f"CppOrderly-{cluster.mode}", f"cpp-orderly-{cluster.mode}"
    cluster.create_topic(topic, masters=("broker-a-0",))
    output = tmp_path / "orderly.out"
    scenario = {
        "namesrv": ";".join(cluster.namesrv),
        "topic": topic,
        "group": group,
        "send": 40,
        "prefix": "o",
        "expect": 40,
        "timeout_s": 60,
        "hold_s": 6,
        "orderly": True,
    }
    with output.open("w") as sink:
        driver = subprocess.Popen(
            [str(interop_clients.python_executable), str(CPP_DRIVER), json.dumps(scenario)],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:

        def all_received() -> bool:
            if len(events(output.read_text(), "received")) >= 40:
                return True
            assert driver.poll() is None, output.read_text()[-2000:]
            return False

        wait_until(
            all_received,
            what="every message at the orderly consumer",
            timeout_s=60,
            interval_s=0.2,
        )
        queues = [{"topic": topic, "brokerName": "broker-a", "queueId": i} for i in range(4)]
        body = json.dumps({"consumerGroup": group, "clientId": "probe", "mqSet": queues})
        with BlockingClient(cluster.brokers["broker-a-0"].addr, timeout_s=5.0) as client:
            answer = client.invoke(
                RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, {}, body.encode())
            )
        assert answer.code == ResponseCode.SUCCESS
        assert json.loads(answer.body or b"")["lockOKMQSet"] == [], "the cpp client holds all"
        assert driver.wait(timeout=60) == 0
    finally:
        if driver.poll() is None:
            driver.kill()
    received = events(output.read_text(), "received")
    assert Counter(e["body"] for e in received) == Counter({f"o-{i}": 1 for i in range(40)})
    per_queue: dict[int, list[int]] = {}
    for event in received:
        per_queue.setdefault(event["queueId"], []).append(event["queueOffset"])
    assert per_queue == {queue_id: list(range(10)) for queue_id in range(4)}, "in queue order"


def test_a_group_of_three_splits_the_queues_averagely_and_rebalances_when_one_leaves(
    cluster: ConsumeCluster, interop_clients: InteropClients
) -> None:
    topic, group = f"AliGroup-{cluster.mode}", f"ali-group-{cluster.mode}"
    cluster.create_topic(topic)
    out = run_ali(
        interop_clients,
        {
            "namesrv": cluster.namesrv,
            "topic": topic,
            "group": group,
            "send": 40,
            "prefix": "g",
            "consumers": ["c1", "c2", "c3"],
            "expect": 80,
            "timeoutMs": 60_000,
            "holdMs": 3_000,
            "leaveAfterMs": {"c3": 12_000},
            "sendAfterMs": {"16000": 40},
        },
    )
    allocations = events(out, "allocation")
    queues = [
        QueueKey(topic, broker, queue_id)
        for broker in ("broker-a", "broker-b")
        for queue_id in range(4)
    ]
    ids = ["ip@c1", "ip@c2", "ip@c3"]
    expected_three = {
        instance: [
            f"{q.broker_name}:{q.queue_id}"
            for q in allocate_averagely(queues, ids, f"ip@{instance}")
        ]
        for instance in ("c1", "c2", "c3")
    }
    expected_two = {
        instance: [
            f"{q.broker_name}:{q.queue_id}"
            for q in allocate_averagely(queues, ids[:2], f"ip@{instance}")
        ]
        for instance in ("c1", "c2")
    }

    def last_before(ms: int) -> dict[str, list[str]]:
        latest: dict[str, list[str]] = {}
        for event in allocations:
            if event["elapsed"] < ms:
                latest[event["instance"]] = event["queues"]
        return latest

    assert last_before(12_000) == expected_three, "three clients: 3 + 3 + 2 queues"
    assert [e["instance"] for e in events(out, "closed")] == ["c3"]
    remaining = {k: v for k, v in last_before(10**9).items() if k != "c3"}
    assert remaining == expected_two, "c3 left: its queues went to c1 and c2"
    received = events(out, "received")
    counts = Counter(e["body"] for e in received)
    assert set(counts) == {f"g-{i}" for i in range(80)}, "no message is lost"
    # A redelivery could only come from a queue changing hands (at-least-once while a
    # rebalance settles); one client never sees a message twice.
    per_client = Counter((e["instance"], e["body"]) for e in received)
    assert max(per_client.values()) == 1
    after_leave = [e for e in received if int(e["body"].split("-")[1]) >= 40]
    assert {e["instance"] for e in after_leave} <= {"c1", "c2"}


def test_the_send_message_and_consume_commands(cluster: ConsumeCluster) -> None:
    """What the README shows: ``send_message`` to a master, ``consume`` through the
    NameServers; a body named with ``--fail`` comes back once from the retry topic."""
    topic = f"CliTopic-{cluster.mode}"
    cluster.create_topic(topic)
    manage = [sys.executable, str(PROJECT_DIR / "manage.py")]
    sent = subprocess.run(
        [
            *manage,
            "send_message",
            "--broker",
            cluster.brokers["broker-a-0"].addr,
            "--topic",
            topic,
            "--count",
            "5",
            "--body",
            "hello",
            "--tags",
            "TagA",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        cwd=PROJECT_DIR,
    )
    assert [json.loads(line)["code"] for line in sent.stdout.splitlines()] == [0] * 5
    consumed = subprocess.run(
        [
            *manage,
            "consume",
            "--namesrv",
            ";".join(cluster.namesrv),
            "--topic",
            topic,
            "--group",
            f"cli-{cluster.mode}",
            "--count",
            "5",
            "--idle",
            "30",
            "--tags",
            "TagA",
            "--fail",
            "hello",
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
        cwd=PROJECT_DIR,
    )
    lines = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert len(lines) == 6, "five messages, the first of them twice"
    assert [line["reconsumeTimes"] for line in lines].count(1) == 1
    assert {(line["topic"], line["tags"], line["body"]) for line in lines} == {
        (topic, "TagA", "hello")
    }
    assert "consumed 5 message(s)" in consumed.stderr


def test_killing_a_master_lets_consumers_read_everything_from_the_slave(
    cluster: ConsumeCluster, interop_clients: InteropClients
) -> None:
    topic = f"AliKill-{cluster.mode}"
    cluster.create_topic(topic)
    out = run_ali(
        interop_clients,
        {
            "namesrv": cluster.namesrv,
            "topic": topic,
            "group": "unused",
            "send": 60,
            "prefix": "k",
            "consumers": [],
            "expect": 0,
            "timeoutMs": 30_000,
        },
    )
    sent = events(out, "sent")
    assert len(sent) == 60 and any(e["brokerName"] == "broker-a" for e in sent)
    master, slave = cluster.brokers["broker-a-0"].addr, cluster.brokers["broker-a-1"].addr
    wait_until(
        lambda: (
            broker_control.runtime_info(master)["commitLogMaxOffset"]
            == broker_control.runtime_info(slave)["commitLogMaxOffset"]
        ),
        what="the slave caught up",
        timeout_s=SYNC_TIMEOUT_S,
        interval_s=0.1,
    )
    broker_control.stop_broker(cluster.run_dir, "broker-a-0", kill=True)

    def master_gone(route: Any) -> bool:
        addrs = [d.broker_addrs for d in route.broker_datas if d.broker_name == "broker-a"]
        return bool(addrs) and master not in addrs[0].values() and slave in addrs[0].values()

    cluster.wait_route(topic, master_gone)
    ali = run_ali(
        interop_clients,
        {
            "namesrv": cluster.namesrv,
            "topic": topic,
            "group": f"after-kill-{cluster.mode}",
            "send": 0,
            "prefix": "k",
            "consumers": ["c1"],
            "expect": 60,
            "timeoutMs": 60_000,
            "holdMs": 2_000,
        },
    )
    ali_counts = Counter(e["body"] for e in events(ali, "received"))
    assert ali_counts == Counter({f"k-{i}": 1 for i in range(60)})
    from_slave = {
        e["storeHost"]
        for e in events(ali, "received")
        if e["body"] in {s["body"] for s in sent if s["brokerName"] == "broker-a"}
    }
    assert from_slave == {slave}
    cpp = run_cpp(
        interop_clients,
        {
            "namesrv": ";".join(cluster.namesrv),
            "topic": topic,
            "group": f"cpp-after-kill-{cluster.mode}",
            "send": 0,
            "prefix": "k",
            "expect": 60,
            "timeout_s": 60,
            "hold_s": 2,
        },
    )
    assert Counter(e["body"] for e in events(cpp, "received")) == ali_counts
