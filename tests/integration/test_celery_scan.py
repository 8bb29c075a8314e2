"""The broker scan runs on the real Celery beat and worker and drops silent brokers.

The cluster runs with ``NAMESRV_SCAN_INTERVAL_S=1``. Both brokers announce a
2 s heartbeat timeout (5.x ``heartbeatTimeoutMillis``) and keep their
connections open, so only the scan (not a closed channel) can remove one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster import launcher
from namesrv_site.celery import build_beat_schedule, node_ids_of
from remoting.blocking import BlockingClient
from remoting.codes import ResponseCode
from tests.integration.cluster_fixtures import (
    make_broker,
    query_route,
    register_broker,
    remoting_addr,
    start_cluster,
    stop_cluster,
)
from tests.waiting import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HEARTBEAT_TIMEOUT_MS = 2000
HEARTBEAT_PERIOD_S = 0.5
EXPIRY_DEADLINE_S = 10.0
SILENT_TOPIC = "SilentBrokerTopic"
LIVE_TOPIC = "LiveBrokerTopic"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh run folder for the module's cluster."""
    return tmp_path_factory.mktemp("celery-scan")


@pytest.fixture(scope="module")
def summary(run_dir: Path) -> Iterator[dict[str, Any]]:
    """A one-node cluster whose beat schedules a scan every second."""
    started = start_cluster(run_dir, nodes=1, env={"NAMESRV_SCAN_INTERVAL_S": "1"})
    try:
        yield started
    finally:
        stop_cluster(run_dir)


class Heartbeat:
    """Re-registers a broker every half second on one open connection until stopped."""

    def __init__(self, addr: str, topic: str) -> None:
        self.client = BlockingClient(addr, timeout_s=5.0)
        self.broker = make_broker("broker-live", 10931)
        self.topic = topic
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(HEARTBEAT_PERIOD_S):
            register_broker(
                self.client, self.broker, [self.topic], heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS
            )

    def __enter__(self) -> Heartbeat:
        register_broker(
            self.client, self.broker, [self.topic], heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS
        )
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()
        self.client.close()


def wait_for_route_code(addr: str, topic: str, code: int, deadline_s: float) -> float:
    """Seconds until GET_ROUTEINFO_BY_TOPIC answers ``code``; fails after ``deadline_s``."""
    started = time.monotonic()
    wait_until(
        lambda: query_route(addr, topic)[0] == code,
        what=f"{topic} answering {code}",
        timeout_s=deadline_s,
        interval_s=0.2,
    )
    return time.monotonic() - started


def test_beat_drops_a_silent_broker_and_keeps_a_heartbeating_one(
    summary: dict[str, Any], run_dir: Path
) -> None:
    addr = remoting_addr(summary, 0)
    silent = BlockingClient(addr, timeout_s=5.0)
    try:
        with Heartbeat(addr, LIVE_TOPIC):
            register_broker(
                silent,
                make_broker("broker-silent", 10921),
                [SILENT_TOPIC],
                heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS,
            )
            assert query_route(addr, SILENT_TOPIC)[0] == ResponseCode.SUCCESS

            waited_s = wait_for_route_code(
                addr, SILENT_TOPIC, ResponseCode.TOPIC_NOT_EXIST, EXPIRY_DEADLINE_S
            )

            # Well after the silent broker's timeout, the one that heart-beats is still there.
            time.sleep(HEARTBEAT_TIMEOUT_MS / 1000)
            live_code, live_route = query_route(addr, LIVE_TOPIC)
    finally:
        silent.close()  # only now: a closed channel must not be what removed the broker

    assert waited_s >= HEARTBEAT_TIMEOUT_MS / 1000 - 0.5
    assert live_code == ResponseCode.SUCCESS
    assert live_route is not None
    assert [q.broker_name for q in live_route.queue_datas] == ["broker-live"]
    worker_log = (run_dir / "celery" / "worker.log").read_text()
    assert "scan of n1 at" in worker_log
    assert "expired 1 broker(s)" in worker_log


def test_beat_schedules_one_scan_per_node_of_the_cluster_file(
    summary: dict[str, Any], run_dir: Path
) -> None:
    node_ids = node_ids_of(run_dir / launcher.CLUSTER_FILE_NAME)
    schedule = build_beat_schedule(node_ids, 1)

    assert node_ids == ["n1"]
    assert schedule["scan-not-active-broker-n1"]["task"] == "namesrv_app.tasks.scan_node"
    assert schedule["scan-not-active-broker-n1"]["args"] == ("n1",)
    beat_log = (run_dir / "celery" / "beat.log").read_text()
    assert "Sending due task scan-not-active-broker-n1" in beat_log
