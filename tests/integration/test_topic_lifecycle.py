"""A topic's life through the console, as RocketMQ's dashboard does it, on a real cluster.

Three eventual nodes with the real demo brokers (broker-a and broker-b, a master
and a slave each). An operator creates a topic through ``/ops/register-topic/``
"through the brokers" (UPDATE_AND_CREATE_TOPIC on both masters, which register it
with every NameServer), then deletes it through ``/ops/delete-topic/``
(DELETE_TOPIC_IN_BROKER on all four brokers, then DELETE_TOPIC_IN_NAMESRV on every
node). Through a master's restart (a full registration) and past the brokers' next
periodic registration it is still gone, while a topic deleted on the NameServers
only (the old console behaviour) comes back with that restart. A broker that does
not answer the delete is named in a warning (HTTP 207), never passed over.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest
import requests

from broker_app.config import BrokerConfig
from localcluster import broker_control
from localcluster.run_secrets import read_run_secrets
from remoting.blocking import BlockingClient
from remoting.bodies import decode_topic_config_serialize_wrapper
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from tests.integration.cluster_fixtures import (
    FREE_PORTS,
    cluster_cli,
    create_operator,
    query_route,
    remoting_addr,
    stop_cluster,
)

pytestmark = [pytest.mark.slow, pytest.mark.integration]

NODES = 3
OPERATOR = "lifecycle-ops"
OPERATOR_PASSWORD = "lifecycle-console-password-1"
TOPIC = "LifecycleTopic"
CONTROL_TOPIC = "NamesrvOnlyDeleted"
GROUPS = ("broker-a", "broker-b")
HTTP_TIMEOUT_S = 30.0
WAIT_S = 20.0
# One full registration period of the demo brokers (they keep the default), plus slack.
PAST_REGISTRATION_S = BrokerConfig(store_dir=Path(".")).effective_register_period_ms / 1000 + 5


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[dict[str, Any], Path]]:
    """``cluster up --demo`` on free ports, with a console operator."""
    run_dir = tmp_path / "run"
    done = cluster_cli(
        "up", "--nodes", str(NODES), "--run-dir", str(run_dir), "--json", "--demo", *FREE_PORTS
    )
    try:
        assert done.returncode == 0, f"cluster up failed:\n{done.stdout}\n{done.stderr}"
        summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        create_operator(run_dir, OPERATOR, password=OPERATOR_PASSWORD)
        yield summary, run_dir
    finally:
        stop_cluster(run_dir)


class Console:
    """A logged-in console session (cookies and CSRF), as a browser has."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.session = requests.Session()

    def _token(self, path: str) -> str:
        page = self.session.get(self.base + path, timeout=HTTP_TIMEOUT_S)
        assert page.status_code == 200, (path, page.status_code)
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert found is not None, page.text
        return found.group(1)

    def log_in(self, username: str, password: str) -> None:
        token = self._token("/accounts/login/")
        self.session.post(
            self.base + "/accounts/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": token},
            headers={"Referer": self.base + "/accounts/login/"}, timeout=HTTP_TIMEOUT_S,
        )  # fmt: skip
        assert self.session.get(self.base + "/ops/", timeout=HTTP_TIMEOUT_S).status_code == 200

    def page(self, path: str) -> str:
        return self.session.get(self.base + path, timeout=HTTP_TIMEOUT_S).text

    def operation(self, slug: str, data: dict[str, Any]) -> tuple[int, str | None, str | None]:
        """POST one operation form: the status, the result line and the error line."""
        path = f"/ops/{slug}/"
        token = self._token(path)
        response = self.session.post(
            self.base + path, data={**data, "csrfmiddlewaretoken": token},
            headers={"Referer": self.base + path}, timeout=HTTP_TIMEOUT_S,
        )  # fmt: skip
        result = re.search(r'id="operation-result">(.*?)</p>', response.text, re.S)
        error = re.search(r'id="operation-error">(.*?)</p>', response.text, re.S)
        return (
            response.status_code,
            unescape(result.group(1)) if result else None,
            unescape(error.group(1)) if error else None,
        )


def wait_until(predicate: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def broker_topics(addr: str) -> set[str]:
    """GET_ALL_TOPIC_CONFIG of one broker: the names in its topic table."""
    with BlockingClient(addr, timeout_s=5.0) as client:
        response = client.invoke(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
    assert response.code == ResponseCode.SUCCESS and response.body is not None
    return set(decode_topic_config_serialize_wrapper(response.body).topic_config_table)


def served_by(addr: str, topic: str) -> set[str] | None:
    """The broker groups ``topic`` has queues on at one node; None for TOPIC_NOT_EXIST."""
    code, route = query_route(addr, topic)
    if code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert code == ResponseCode.SUCCESS and route is not None, code
    return {queue.broker_name for queue in route.queue_datas}


def test_a_topic_deleted_in_the_console_is_gone_from_brokers_and_nodes_for_good(
    cluster: tuple[dict[str, Any], Path],
) -> None:
    summary, run_dir = cluster
    nodes = [remoting_addr(summary, index) for index in range(NODES)]
    brokers = {b["label"]: b["addr"] for b in summary["brokers"]}
    assert sorted(brokers) == ["broker-a-0", "broker-a-1", "broker-b-0", "broker-b-1"]
    masters = [brokers["broker-a-0"], brokers["broker-b-0"]]
    console = Console(f"http://127.0.0.1:{summary['nodes'][0]['web_port']}")
    console.log_in(OPERATOR, OPERATOR_PASSWORD)
    wait_until(lambda: all(f'value="{g}"' in console.page("/ops/register-topic/")
                           for g in GROUPS), "both broker groups in n1's projection")

    # Create two topics through the brokers: the form's default method.
    form = console.page("/ops/register-topic/")
    assert re.search(r'value="brokers"[^>]*checked', form), "brokers is the default method"
    for topic in (TOPIC, CONTROL_TOPIC):
        status, result, error = console.operation("register-topic", {
            "topic": topic, "brokers": list(GROUPS), "read_queue_nums": "4",
            "write_queue_nums": "4", "perm": "6", "method": "brokers",
        })  # fmt: skip
        assert (status, error) == (200, None), error
        assert result is not None and f"Created topic {topic}" in result
        assert all(addr in result for addr in masters), result
    for topic in (TOPIC, CONTROL_TOPIC):
        for node in nodes:
            wait_until(lambda n=node, t=topic: served_by(n, t) == set(GROUPS), f"{topic} on {node}")
        for addr in brokers.values():  # the slaves copy it from their masters
            wait_until(lambda a=addr, t=topic: t in broker_topics(a), f"{topic} on {addr}")

    # Delete TOPIC in the console: every broker first, then every NameServer.
    status, result, error = console.operation(
        "delete-topic", {"topic": TOPIC, "cluster": "", "confirm": "on"}
    )
    assert (status, error) == (200, None), error
    assert result is not None and f"Deleted topic {TOPIC}" in result
    assert all(addr in result for addr in brokers.values()), result
    assert all(f"n{index + 1}" in result for index in range(NODES)), result
    for node in nodes:
        assert served_by(node, TOPIC) is None, node
    for addr in brokers.values():
        assert TOPIC not in broker_topics(addr), addr

    # The old console behaviour, for contrast: CONTROL_TOPIC on the NameServers only.
    admin = read_run_secrets(run_dir).admin_credentials()
    for node in nodes:
        request = RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV,
                                          {"topic": CONTROL_TOPIC})  # fmt: skip
        with BlockingClient(node, timeout_s=5.0, credentials=admin) as client:
            assert client.invoke(request).code == ResponseCode.SUCCESS
        assert served_by(node, CONTROL_TOPIC) is None

    # A restarted master registers its whole table with every node: what it still
    # holds comes back (CONTROL_TOPIC, on its group), what it deleted does not.
    assert broker_control.stop_broker(run_dir, "broker-a-0")
    broker_control.restart_broker(run_dir, "broker-a-0")
    for node in nodes:
        wait_until(lambda n=node: served_by(n, CONTROL_TOPIC) == {"broker-a"},
                   f"{CONTROL_TOPIC} back on {node} with broker-a's registration")
        assert served_by(node, TOPIC) is None, f"{TOPIC} came back on {node}"

    # Past one full registration period of every broker (they heart-beat every second).
    time.sleep(PAST_REGISTRATION_S)
    for node in nodes:
        assert served_by(node, TOPIC) is None, f"{TOPIC} came back on {node}"
    for addr in brokers.values():
        assert TOPIC not in broker_topics(addr), addr
        assert CONTROL_TOPIC in broker_topics(addr), addr

    # A broker that does not answer: the delete goes on, and the warning names it.
    stuck = next(b for b in broker_control.local_brokers(run_dir) if b.spec.label == "broker-b-1")
    assert stuck.pid is not None
    os.kill(stuck.pid, signal.SIGSTOP)
    try:
        status, result, error = console.operation(
            "delete-topic", {"topic": CONTROL_TOPIC, "cluster": "", "confirm": "on"}
        )
    finally:
        os.kill(stuck.pid, signal.SIGCONT)
    assert (status, result) == (207, None), result
    assert error is not None and "FAILED on broker" in error and stuck.spec.addr in error, error
    assert all(f"n{index + 1}" in error for index in range(NODES)), error
    for node in nodes:
        assert served_by(node, CONTROL_TOPIC) is None, node
    for addr in masters:
        assert CONTROL_TOPIC not in broker_topics(addr), addr
    # The slave that missed it copies its master's table at its next metadata sync.
    wait_until(lambda: CONTROL_TOPIC not in broker_topics(stuck.spec.addr),
               "the missed slave catching up with its master", timeout_s=30.0)
