"""The REST route and the wire route are one answer, whatever the table holds.

Hypothesis drives a real node (service, LocalReplicator, the running projection
writer) through registrations with zones and filter servers, unregistrations
that leave slaves alone (acting masters), order configs and config changes.
Then every topic is asked twice: GET_ROUTEINFO_BY_TOPIC through the gateway's
real dispatcher, and ``/api/v1/routes/<topic>/`` through Django with a viewer's
token. The two JSON documents must be equal, and a topic the wire does not know
must be a 404 over REST.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings, strategies as st

from gateway.clock import ManualClock
from gateway.dispatch import PENDING, RequestDispatcher
from gateway.services import NameServerService
from namesrv_app import models
from namesrv_app.api.route_reads import CACHE
from namesrv_app.projection.rows import PROJECTION_MODELS
from namesrv_app.projection.writer import ProjectionWriter
from namesrv_app.tokens import issue_token
from raftstore.replicator import LocalReplicator
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.model import (
    NAMESPACE_ORDER_TOPIC_CONFIG,
    DataVersion,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from remoting.register_request import BrokerRegistration
from tests.web.conftest import make_user

pytestmark = pytest.mark.django_db(transaction=True)

TOPICS = ("Orders", "Payments", "Audit", "Ledger")
UNKNOWN_TOPIC = "NeverRegistered"
GROUPS = ("broker-a", "broker-b", "broker-c")
FLUSH_TIMEOUT_S = 10.0
EXAMPLES = 25


@dataclass(frozen=True)
class Register:
    """REGISTER_BROKER of one replica."""

    group: str
    broker_id: int
    topics: tuple[str, ...]
    zone: str | None
    filter_servers: tuple[str, ...]
    acting_master: bool

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{10_000 + 100 * GROUPS.index(self.group) + self.broker_id}"


@dataclass(frozen=True)
class Unregister:
    """UNREGISTER_BROKER of one replica (the master going away leaves its slaves)."""

    group: str
    broker_id: int


@dataclass(frozen=True)
class OrderConfig:
    """An ORDER_TOPIC_CONFIG KV entry for a topic."""

    topic: str
    value: str


@dataclass(frozen=True)
class Config:
    """UPDATE_NAMESRV_CONFIG of the two properties that shape route answers."""

    acting_master: bool
    order_enabled: bool


@dataclass(frozen=True)
class DeleteTopic:
    """DELETE_TOPIC_IN_NAMESRV."""

    topic: str


STEP = st.one_of(
    st.builds(
        Register,
        group=st.sampled_from(GROUPS),
        broker_id=st.sampled_from([0, 1, 2]),
        # Two topics at least: a new broker's one-topic registration is refused upstream.
        topics=st.lists(st.sampled_from(TOPICS), min_size=2, max_size=4, unique=True).map(tuple),
        zone=st.sampled_from([None, "zone-1", "zone-2"]),
        filter_servers=st.sampled_from([(), ("127.0.0.1:30001",), ("127.0.0.1:30002", "h:1")]),
        acting_master=st.booleans(),
    ),
    st.builds(Unregister, group=st.sampled_from(GROUPS), broker_id=st.sampled_from([0, 1, 2])),
    st.builds(
        OrderConfig,
        topic=st.sampled_from(TOPICS),
        value=st.sampled_from(["broker-a:4", "broker-a:4;broker-b:8"]),
    ),
    st.builds(Config, acting_master=st.booleans(), order_enabled=st.booleans()),
    st.builds(DeleteTopic, topic=st.sampled_from(TOPICS)),
)


async def apply(service: NameServerService, step: Any) -> None:
    """Send one step through the real service (the one write path)."""
    if isinstance(step, Register):
        await service.register_broker(
            BrokerRegistration(
                cluster_name="DefaultCluster",
                broker_addr=step.addr,
                broker_name=step.group,
                broker_id=step.broker_id,
                ha_server_addr=step.addr,
                zone_name=step.zone,
                enable_acting_master=step.acting_master,
            ),
            TopicConfigSerializeWrapper(
                data_version=DataVersion(timestamp=1, counter=1),
                topic_config_table={t: TopicConfig(t, 4, 4, 6) for t in step.topics},
            ),
            filter_server_list=step.filter_servers,
            channel=f"channel-{step.addr}",
        )
    elif isinstance(step, Unregister):
        addr = Register(step.group, step.broker_id, (), None, (), False).addr
        await service.unregister_broker(
            cluster_name="DefaultCluster",
            broker_addr=addr,
            broker_name=step.group,
            broker_id=step.broker_id,
        )
    elif isinstance(step, OrderConfig):
        await service.put_kv(
            namespace=NAMESPACE_ORDER_TOPIC_CONFIG, key=step.topic, value=step.value
        )
    elif isinstance(step, Config):
        await service.update_namesrv_config(
            {
                "supportActingMaster": str(step.acting_master).lower(),
                "orderMessageEnable": str(step.order_enabled).lower(),
            }
        )
    else:
        await service.delete_topic(step.topic)


def wire_route(dispatcher: RequestDispatcher, topic: str) -> dict[str, Any] | None:
    """GET_ROUTEINFO_BY_TOPIC as a 4.9.4+ client asks it (standard JSON)."""
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    answer = dispatcher.answer_now(request)
    assert answer is not PENDING and isinstance(answer, RemotingCommand)
    if answer.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    loaded: dict[str, Any] = json.loads(answer.body or b"{}")
    return loaded


def rest_route(api: Client, topic: str) -> dict[str, Any] | None:
    """``/api/v1/routes/<topic>/`` as JSON; None for its 404."""
    response = api.get(f"/api/v1/routes/{topic}/", headers={"Accept": "application/json"})
    if response.status_code == 404:
        return None
    assert response.status_code == 200, response.content[:300]
    route: dict[str, Any] = response.json()["route"]
    return route


@pytest.fixture
def api(db: Any) -> Client:
    """The API with a viewer's token."""
    key, _ = issue_token(make_user("vera", "viewer"))
    return Client(headers={"Authorization": f"Token {key}"})


@pytest.fixture
def fresh_node() -> Iterator[None]:
    """Projection tables emptied before each example (the writer rebuilds them)."""
    yield
    for model in PROJECTION_MODELS:
        model.objects.all().delete()


def test_the_rest_route_is_the_wire_route_for_any_table(api: Client, fresh_node: None) -> None:
    @given(steps=st.lists(STEP, min_size=1, max_size=12))
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    def check(steps: list[Any]) -> None:
        CACHE.clear()
        replicator = LocalReplicator("n1")
        service = NameServerService(replicator, ManualClock())
        writer = ProjectionWriter(replicator)
        writer.start(rebuild=True)
        try:
            for step in steps:
                asyncio.run(apply(service, step))
            assert writer.flush(FLUSH_TIMEOUT_S)
            dispatcher = RequestDispatcher(service, clock=ManualClock())
            for topic in (*TOPICS, UNKNOWN_TOPIC):
                assert rest_route(api, topic) == wire_route(dispatcher, topic), topic
        finally:
            writer.stop()

    check()


def test_a_slave_left_alone_is_the_acting_master_over_rest_too(api: Client) -> None:
    """The case the rows alone got wrong: the master gone, the slave answers as id 0."""
    replicator = LocalReplicator("n1")
    service = NameServerService(replicator, ManualClock())
    writer = ProjectionWriter(replicator)
    writer.start(rebuild=True)
    try:
        for broker_id in (0, 1):
            asyncio.run(apply(service, Register("broker-a", broker_id, TOPICS, None, (), True)))
        asyncio.run(apply(service, Config(acting_master=True, order_enabled=False)))
        asyncio.run(apply(service, Unregister("broker-a", 0)))
        assert writer.flush(FLUSH_TIMEOUT_S)
        route = rest_route(api, "Orders")
        assert route is not None
        slave = Register("broker-a", 1, (), None, (), True).addr
        assert route["brokerDatas"][0]["brokerAddrs"] == {"0": slave}
        assert models.TopicRoute.objects.filter(topic="Orders").exists()
        dispatcher = RequestDispatcher(service, clock=ManualClock())
        assert route == wire_route(dispatcher, "Orders")
    finally:
        writer.stop()


def test_a_topic_deleted_in_the_same_batch_as_a_config_change_loses_its_route() -> None:
    """Found by the property test: a batch merging a delete with a config change
    recomputes every topic of the table, and the deleted one is no longer in it."""
    replicator = LocalReplicator("n1")
    service = NameServerService(replicator, ManualClock())
    writer = ProjectionWriter(replicator)
    writer.rebuild()
    writer.attach()
    asyncio.run(apply(service, Register("broker-b", 0, ("Ledger", "Orders"), None, (), False)))
    drain(writer)
    assert models.TopicRoute.objects.filter(topic="Ledger").exists()

    asyncio.run(apply(service, DeleteTopic("Ledger")))
    asyncio.run(apply(service, Config(acting_master=True, order_enabled=False)))
    drain(writer)  # one merged batch: the delete and the config change together

    assert not models.TopicRoute.objects.filter(topic="Ledger").exists()
    assert models.TopicRoute.objects.filter(topic="Orders").exists()


def drain(writer: ProjectionWriter) -> None:
    """Write the waiting (merged) delta, on this thread (no writer thread)."""
    taken = writer._take(0.0)
    assert taken is not None and taken[0] is not None
    writer._process(*taken)
