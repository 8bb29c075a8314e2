"""Fixtures of the NameServer app tests: a real route table behind a local replicator.

The cast follows upstream RequestProcessorTest: ``default-broker`` (id 1234, a
prime slave) in ``default-cluster`` serving ``unit-test0`` and ``unit-test1``.
"""

from __future__ import annotations

import pytest

from gateway.clock import ManualClock
from gateway.dispatch import RequestDispatcher
from gateway.services import NameServerService
from raftstore.commands import RegisterBroker
from raftstore.config import NamesrvConfig
from raftstore.replicator import LocalReplicator
from raftstore.route_table import RouteTable
from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from remoting.register_request import BrokerRegistration

DEFAULT_CLUSTER = "default-cluster"
DEFAULT_BROKER = "default-broker"
DEFAULT_ADDR = "127.0.0.1:10911"
DEFAULT_HA = "127.0.0.1:1001"
DEFAULT_BROKER_ID = 1234
UNIT_TOPICS = ("unit-test0", "unit-test1")
START_MS = 1_700_000_000_000


def unit_topics_wrapper() -> TopicConfigSerializeWrapper:
    """The topics upstream's ``registerRouteInfoManager`` registers: r/w 8, perm 6."""
    return TopicConfigSerializeWrapper(
        data_version=DataVersion(timestamp=START_MS, counter=1),
        topic_config_table={
            name: TopicConfig(topic_name=name, read_queue_nums=8, write_queue_nums=8, perm=6)
            for name in UNIT_TOPICS
        },
    )


def build_node(
    config: NamesrvConfig | None = None, clock: ManualClock | None = None
) -> tuple[LocalReplicator, NameServerService, RequestDispatcher]:
    """A replicator, service and dispatcher over a fresh table."""
    replicator = LocalReplicator("n1", RouteTable(config or NamesrvConfig()))
    service = NameServerService(replicator, clock or ManualClock(START_MS))
    return replicator, service, RequestDispatcher(service)


DEFAULT_BROKER_REGISTRATION = BrokerRegistration(
    cluster_name=DEFAULT_CLUSTER,
    broker_addr=DEFAULT_ADDR,
    broker_name=DEFAULT_BROKER,
    broker_id=DEFAULT_BROKER_ID,
    ha_server_addr=DEFAULT_HA,
    zone_name="",
    enable_acting_master=False,
)
"""Upstream's 10-argument registration: a new-version broker (acting master false),
with :func:`unit_topics_wrapper`, no filter server, over ``DEFAULT_CHANNEL``."""
DEFAULT_CHANNEL = "default-channel"


def default_registration(service: NameServerService) -> RegisterBroker:
    """The command of :data:`DEFAULT_BROKER_REGISTRATION` on ``service``."""
    return service.registration_command(
        DEFAULT_BROKER_REGISTRATION,
        channel=DEFAULT_CHANNEL,
        topic_config_wrapper=unit_topics_wrapper(),
        filter_server_list=(),
    )


async def register_default_broker(service: NameServerService) -> None:
    """Register ``default-broker`` (:data:`DEFAULT_BROKER_REGISTRATION`)."""
    await service.register(default_registration(service))


@pytest.fixture
def clock() -> ManualClock:
    """A manual clock at the cast's start time."""
    return ManualClock(START_MS)


@pytest.fixture
def node(
    clock: ManualClock,
) -> tuple[LocalReplicator, NameServerService, RequestDispatcher]:
    """A node whose table has enableAllTopicList on (as upstream's @Before sets it)."""
    return build_node(NamesrvConfig(enable_all_topic_list=True), clock)


@pytest.fixture
async def registered_node(
    node: tuple[LocalReplicator, NameServerService, RequestDispatcher],
) -> tuple[LocalReplicator, NameServerService, RequestDispatcher]:
    """The node with ``default-broker`` registered."""
    await register_default_broker(node[1])
    return node
