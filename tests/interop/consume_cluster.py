"""A cluster for the consumer interop tests: three nodes and real ``broker_app`` brokers.

``cluster up`` starts three NameServer nodes in the mode asked for; broker-a (a master
and its slave) and broker-b (a master) then run as ``run_broker`` processes registering
with all three, signed with the run's broker account, as the demo brokers are. Retries
wait 1 s per delay level here (``messageDelayLevel``), so a retry test takes seconds,
not the default 10 s, 30 s, 1 min ...
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localcluster import broker_control
from localcluster.broker_control import BrokerSpec
from localcluster.plan import DEMO_BROKER_SETTINGS, free_port
from localcluster.run_secrets import read_run_secrets
from remoting.acl import Credentials
from remoting.blocking import BlockingClient
from remoting.bodies import decode_topic_config_serialize_wrapper
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.model import PERM_READ, PERM_WRITE
from tests.integration.cluster_fixtures import query_route, remoting_addr, start_cluster
from tests.waiting import wait_until

TOPIC_QUEUE_NUMS = 4
FAST_DELAY_LEVELS = " ".join(["1s"] * 18)
ROUTE_WAIT_S = 30.0


@dataclass
class ConsumeCluster:
    """What the tests need of the running cluster."""

    run_dir: Path
    mode: str
    namesrv: list[str]
    brokers: dict[str, BrokerSpec]
    admin: Credentials | None

    def create_topic(
        self, topic: str, masters: tuple[str, ...] = ("broker-a-0", "broker-b-0")
    ) -> None:
        """Create ``topic`` on the masters (4 queues each; both by default) and wait for
        its route on every node, with broker-a's slave."""
        for label in masters:
            broker_control.create_topic(
                self.brokers[label].addr,
                topic,
                read_queue_nums=TOPIC_QUEUE_NUMS,
                write_queue_nums=TOPIC_QUEUE_NUMS,
                perm=PERM_READ | PERM_WRITE,
                credentials=self.admin,
            )
        self.wait_route(
            topic,
            lambda route: (
                len(route.queue_datas) == len(masters)
                and any(1 in data.broker_addrs for data in route.broker_datas)
            ),
        )
        # The slave learns the topic from its master (SlaveSynchronize, every second here);
        # it serves pulls of the topic only once it has.
        slave = self.brokers["broker-a-1"].addr
        wait_until(
            lambda: topic in slave_topics(slave),
            what=f"{topic} on the slave",
            timeout_s=ROUTE_WAIT_S,
            interval_s=0.2,
        )

    def wait_route(self, topic: str, check: Any, timeout_s: float = ROUTE_WAIT_S) -> None:
        """Until every node's route of ``topic`` passes ``check``."""
        routes: list[Any] = []

        def ready() -> bool:
            routes[:] = [query_route(addr, topic) for addr in self.namesrv]
            return all(route is not None and check(route) for _code, route in routes)

        wait_until(
            ready,
            what=lambda: f"the route of {topic} ready ({routes})",
            timeout_s=timeout_s,
            interval_s=0.3,
        )


def slave_topics(addr: str) -> set[str]:
    """The topics a broker holds (GET_ALL_TOPIC_CONFIG)."""
    with BlockingClient(addr, timeout_s=5.0) as client:
        answer = client.invoke(RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG, {}))
    wrapper = decode_topic_config_serialize_wrapper(answer.body or b"")
    return set(wrapper.topic_config_table)


def start_consume_cluster(run_dir: Path, mode: str) -> ConsumeCluster:
    """Three nodes in ``mode`` and broker-a (master + slave), broker-b (master)."""
    summary = start_cluster(run_dir, "--mode", mode, nodes=3)
    namesrv = [remoting_addr(summary, index) for index in range(3)]
    secrets = read_run_secrets(run_dir)
    settings = {
        **DEMO_BROKER_SETTINGS,
        **secrets.broker_settings(),
        "messageDelayLevel": FAST_DELAY_LEVELS,
        "register_initial_delay_ms": "1000",
        "slave_sync_interval_ms": "1000",
    }
    taken: set[int] = set()

    def port() -> int:
        chosen = free_port(avoid=taken)
        taken.add(chosen)
        return chosen

    brokers: dict[str, BrokerSpec] = {}
    for name, broker_id in (("broker-a", 0), ("broker-b", 0), ("broker-a", 1)):
        spec = BrokerSpec(name, broker_id, port(), port(), tuple(namesrv), settings=dict(settings))
        broker_control.start_broker(run_dir, spec)
        brokers[spec.label] = spec
    return ConsumeCluster(run_dir, mode, namesrv, brokers, secrets.admin_credentials())
