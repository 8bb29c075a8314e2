"""Simulated brokers for ``make run`` / ``cluster up --demo``.

Two broker groups of ``DefaultCluster`` (broker-a and broker-b, a master and a
slave each) register the topics TopicTest, DemoOrders and DemoEvents with every
NameServer node every 30 s, over the real wire protocol (REGISTER_BROKER with a
RegisterBrokerBody, as a 5.x ``BrokerOuterAPI`` sends it). They run as threads
of one process and store no message: nothing listens on their addresses. The
real broker app replaces them later.

Each (broker, node) pair keeps its own connection open between rounds, the way
a broker's channel to a NameServer stays up: closing it would make the node
drop the broker at once (``onChannelDestroy``).

Run: ``python -m localcluster.demo --cluster-file run/local/cluster.json``.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from remoting.blocking import BlockingClient
from remoting.client import RemotingClientError
from remoting.codes import CURRENT_VERSION, ResponseCode
from remoting.command import RemotingCommand
from remoting.model import (
    MASTER_ID,
    PERM_READ,
    PERM_WRITE,
    DataVersion,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from remoting.register_body import register_broker_request
from tools.cli import ExactArgumentParser

log = logging.getLogger("localcluster.demo")

DEMO_CLUSTER = "DefaultCluster"
DEMO_BROKER_NAMES = ("broker-a", "broker-b")
DEMO_TOPICS = ("TopicTest", "DemoOrders", "DemoEvents")
DEMO_QUEUE_NUMS = 4
DEMO_HOST = "127.0.0.1"
DEMO_FIRST_BROKER_PORT = 10911
BROKER_PORT_STEP = 10
SLAVE_ID = 1
REGISTER_PERIOD_S = 30.0
REGISTER_TIMEOUT_S = 6.0


@dataclass(frozen=True, slots=True)
class DemoBroker:
    """One simulated broker: its group, id and the addresses it announces."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    ha_addr: str

    @property
    def role(self) -> str:
        """``master`` or ``slave``, for logs."""
        return "master" if self.broker_id == MASTER_ID else "slave"


def demo_brokers(first_port: int = DEMO_FIRST_BROKER_PORT) -> list[DemoBroker]:
    """broker-a and broker-b, master then slave; a broker's HA port is its port + 1."""
    brokers = []
    port = first_port
    for name in DEMO_BROKER_NAMES:
        for broker_id in (MASTER_ID, SLAVE_ID):
            brokers.append(
                DemoBroker(
                    DEMO_CLUSTER, name, broker_id, f"{DEMO_HOST}:{port}", f"{DEMO_HOST}:{port + 1}"
                )
            )
            port += BROKER_PORT_STEP
    return brokers


def topic_table(topics: Sequence[str], queue_nums: int = DEMO_QUEUE_NUMS) -> dict[str, TopicConfig]:
    """Read-write topics with ``queue_nums`` read and write queues each."""
    return {
        topic: TopicConfig(
            topic_name=topic,
            read_queue_nums=queue_nums,
            write_queue_nums=queue_nums,
            perm=PERM_READ | PERM_WRITE,
        )
        for topic in topics
    }


def register_request(
    broker: DemoBroker,
    topics: dict[str, TopicConfig],
    data_version: DataVersion,
    *,
    heartbeat_timeout_ms: int | None = None,
    version: int = CURRENT_VERSION,
) -> RemotingCommand:
    """REGISTER_BROKER as a broker sends it (without ``enableActingMaster``, as the
    simulated brokers always have)."""
    return register_broker_request(
        cluster_name=broker.cluster,
        broker_name=broker.broker_name,
        broker_id=broker.broker_id,
        broker_addr=broker.addr,
        ha_server_addr=broker.ha_addr,
        wrapper=TopicConfigSerializeWrapper(data_version=data_version, topic_config_table=topics),
        enable_acting_master=None,
        heartbeat_timeout_ms=heartbeat_timeout_ms,
        version=version,
    )


class DemoFleet:
    """The simulated brokers and one open connection per (broker, NameServer node)."""

    def __init__(
        self,
        brokers: Sequence[DemoBroker],
        namesrv_addrs: Sequence[str],
        topics: Sequence[str] = DEMO_TOPICS,
    ) -> None:
        self.brokers = list(brokers)
        self.namesrv_addrs = list(namesrv_addrs)
        self.topics = topic_table(topics)
        # One DataVersion for the fleet's lifetime: the topic table never changes.
        self.data_version = DataVersion(timestamp=int(time.time() * 1000), counter=1)
        self._clients = {
            (b.addr, ns): BlockingClient(ns, timeout_s=REGISTER_TIMEOUT_S)
            for b in self.brokers
            for ns in self.namesrv_addrs
        }

    def register_all(self) -> int:
        """One registration round; returns how many registrations succeeded."""
        done = 0
        for broker in self.brokers:
            for ns in self.namesrv_addrs:
                done += self._register(broker, ns)
        return done

    def _register(self, broker: DemoBroker, namesrv_addr: str) -> int:
        request = register_request(broker, self.topics, self.data_version)
        try:
            answer = self._clients[(broker.addr, namesrv_addr)].invoke(request)
        except RemotingClientError as exc:
            # Connect, timeout or closed: the client reconnects and the next round retries.
            log.warning("%s %s -> %s: %s", broker.broker_name, broker.role, namesrv_addr, exc)
            return 0
        if answer.code != ResponseCode.SUCCESS:
            log.warning(
                "%s %s -> %s answered %d %s",
                broker.broker_name,
                broker.role,
                namesrv_addr,
                answer.code,
                answer.remark,
            )
            return 0
        return 1

    def close(self) -> None:
        """Close every connection (the nodes then drop these brokers at once)."""
        for client in self._clients.values():
            client.close()


def run_fleet(fleet: DemoFleet, stop: threading.Event, period_s: float = REGISTER_PERIOD_S) -> None:
    """Register every ``period_s`` until ``stop`` is set, like BrokerController's schedule."""
    while not stop.is_set():
        done = fleet.register_all()
        log.info(
            "registered %d/%d (broker, node) pairs",
            done,
            len(fleet.brokers) * len(fleet.namesrv_addrs),
        )
        stop.wait(period_s)


def namesrv_addrs_of(cluster_file: Path) -> list[str]:
    """The remoting addresses of the nodes in a cluster file."""
    data = json.loads(Path(cluster_file).read_text(encoding="utf-8"))
    return [f"{n.get('host', DEMO_HOST)}:{n['remoting_port']}" for n in data["nodes"]]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: register the demo fleet with every node of a cluster until SIGTERM."""
    parser = ExactArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cluster-file", type=Path, required=True, help="the cluster.json naming every node"
    )
    parser.add_argument(
        "--period-s", type=float, default=REGISTER_PERIOD_S, help="how often each broker registers"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    stop = threading.Event()

    def request_stop(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    fleet = DemoFleet(demo_brokers(), namesrv_addrs_of(args.cluster_file))
    log.info(
        "demo brokers %s registering %s with %s every %.0f s",
        [f"{b.broker_name}/{b.broker_id}" for b in fleet.brokers],
        list(fleet.topics),
        fleet.namesrv_addrs,
        args.period_s,
    )
    try:
        run_fleet(fleet, stop, args.period_s)
    finally:
        fleet.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
