"""Fixtures of the console and API tests.

The cast: ``DefaultCluster`` with ``broker-a`` and ``broker-b`` (a master and a
slave each) serving ``TopicTest`` and ``DemoOrders``; users ``vera`` (viewer),
``otto`` (operator) and ``nobody`` (no role).

Projection rows come from a real route table: brokers register through the
real service on a LocalReplicator, then the projection's own
``write_full_state`` writes them into the test database. Writes go to a REAL
gateway (``manage.py run_gateway`` in a subprocess on port 0); the settings
point the web side at its ports.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.http import HttpRequest
from django.test import Client
from rest_framework.test import APIClient

from gateway.clock import ManualClock
from gateway.services import NameServerService
from localcluster.argv import GatewayArgs
from localcluster.demo import DemoBroker, register_request, topic_table
from namesrv_app.projection.delta import read_full_state
from namesrv_app.projection.rows import write_full_state
from namesrv_app.tokens import issue_token
from raftstore.replicator import LocalReplicator
from remoting.blocking import BlockingClient
from remoting.model import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from remoting.register_request import BrokerRegistration
from tests.integration.gateway_harness import ADMIN, wait_for_ready_file, write_test_acl

REPO_ROOT = Path(__file__).resolve().parents[2]
SECRET = "web-test-secret"
CLUSTER = "DefaultCluster"
TOPICS = ("TopicTest", "DemoOrders")
START_MS = 1_700_000_000_000
BROKERS = (
    DemoBroker(CLUSTER, "broker-a", 0, "127.0.0.1:10911", "127.0.0.1:10912"),
    DemoBroker(CLUSTER, "broker-a", 1, "127.0.0.1:10921", "127.0.0.1:10922"),
    DemoBroker(CLUSTER, "broker-b", 0, "127.0.0.1:10931", "127.0.0.1:10932"),
    DemoBroker(CLUSTER, "broker-b", 1, "127.0.0.1:10941", "127.0.0.1:10942"),
)
PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def fresh_route_cache() -> Iterator[None]:
    """Each test's DB starts over, so the API's per-process route cache must too."""
    from namesrv_app.api.route_reads import CACHE

    CACHE.clear()
    yield
    CACHE.clear()


# ------------------------------------------------------------------- projection rows


async def _register_cast(service: NameServerService, topics: tuple[str, ...]) -> None:
    for broker in BROKERS:
        wrapper = TopicConfigSerializeWrapper(
            data_version=DataVersion(timestamp=START_MS, counter=1),
            topic_config_table={t: TopicConfig(t, 4, 4, 6) for t in topics},
        )
        await service.register_broker(
            BrokerRegistration(
                cluster_name=broker.cluster,
                broker_addr=broker.addr,
                broker_name=broker.broker_name,
                broker_id=broker.broker_id,
                ha_server_addr=broker.ha_addr,
            ),
            wrapper,
            channel=f"chan-{broker.addr}",
        )
    await service.put_kv(namespace="ORDER_TOPIC_CONFIG", key="DemoOrders", value="broker-a:4")


def project_cast(topics: tuple[str, ...] = TOPICS, node_id: str = "n1") -> LocalReplicator:
    """Register the cast on a real table and write it into the test DB; the replicator."""
    replicator = LocalReplicator(node_id)
    service = NameServerService(replicator, ManualClock(START_MS))
    asyncio.run(_register_cast(service, topics))
    write_full_state(replicator.read(read_full_state), node_id, "eventual")
    return replicator


@pytest.fixture
def cast(db: Any) -> LocalReplicator:
    """The cast, projected into the test database."""
    return project_cast()


# ------------------------------------------------------------------- users


def make_user(username: str, role: str | None) -> User:
    """A user with ``role`` (None: no role at all)."""
    user = User.objects.create_user(username, password=PASSWORD)
    if role is not None:
        # get_or_create: transactional tests flush the groups the migration made.
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


@pytest.fixture
def viewer(db: Any) -> User:
    """vera, a viewer."""
    return make_user("vera", "viewer")


@pytest.fixture
def operator(db: Any) -> User:
    """otto, an operator."""
    return make_user("otto", "operator")


@pytest.fixture
def nobody(db: Any) -> User:
    """A logged-in user without a console role."""
    return make_user("nobody", None)


def log_in(client: Client, username: str, password: str = PASSWORD) -> bool:
    """``client.login`` through the login throttle (django-axes needs the request)."""
    return client.login(request=HttpRequest(), username=username, password=password)


def token_client(user: User | None) -> APIClient:
    """An API client authenticated by the user's token (anonymous for None)."""
    client = APIClient()
    if user is not None:
        key, _ = issue_token(user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def viewer_api(viewer: User) -> APIClient:
    """The API as vera."""
    return token_client(viewer)


@pytest.fixture
def operator_api(operator: User) -> APIClient:
    """The API as otto."""
    return token_client(operator)


# ------------------------------------------------------------------- a real gateway


@dataclass
class RunningGateway:
    """A ``manage.py run_gateway`` subprocess and its ports."""

    proc: subprocess.Popen[bytes]
    port: int
    internal_port: int
    db_path: Path
    admin_secret_file: Path
    """The test admin's secret key (mode 0600): the web side signs its writes with it."""
    # One open connection per broker: in eventual mode a closed broker
    # connection unregisters that broker (upstream BrokerHousekeepingService).
    broker_clients: dict[str, BlockingClient] = field(default_factory=dict)

    @property
    def addr(self) -> str:
        """The public remoting address."""
        return f"127.0.0.1:{self.port}"

    def register(self, broker: DemoBroker, topics: tuple[str, ...]) -> int:
        """REGISTER_BROKER over the wire, as a broker does; the response code."""
        request = register_request(
            broker, topic_table(topics), DataVersion(timestamp=int(time.time() * 1000), counter=1)
        )
        client = self.broker_clients.setdefault(
            broker.addr, BlockingClient(self.addr, timeout_s=5.0)
        )
        return client.invoke(request).code

    def register_again(self, brokers: tuple[DemoBroker, ...], topics: tuple[str, ...]) -> None:
        """Register ``brokers`` over fresh connections. The session gateway's broker
        connections sit idle between tests, and once it closes an idle one (after
        serverChannelMaxIdleTimeSeconds) eventual mode unregisters that broker: a test
        that needs them in the table registers them again first."""
        for broker in brokers:
            idle = self.broker_clients.pop(broker.addr, None)
            if idle is not None:
                idle.close()
            assert self.register(broker, topics) == 0


def start_gateway(
    folder: Path,
    node_id: str = "n1",
    extra_env: dict[str, str] | None = None,
    scan_fallback_s: float | None = 0,
    config: Path | None = None,
) -> RunningGateway:
    """Start a gateway on free ports with its own DB; wait for its ready file.

    ``scan_fallback_s`` None keeps run_gateway's default fallback; by default it is off
    (no Celery here: the gateway would otherwise expire the cast, registered once,
    after three silent periods). ``config``: upstream's ``-c`` properties file."""

    ready = folder / f"{node_id}.ready.json"
    db_path = folder / f"{node_id}.sqlite3"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "namesrv_site.settings",
        "NAMESRV_DB_PATH": str(db_path),
        "NAMESRV_INTERNAL_SECRET": SECRET,
        "NAMESRV_LOG_LEVEL": "WARNING",
        **(extra_env or {}),
    }
    argv = GatewayArgs(
        node=node_id,
        port=0,
        internal_port=0,
        ready_file=ready,
        migrate=True,
        acl_file=write_test_acl(folder),
        scan_fallback_s=scan_fallback_s,
        config=config,
    ).argv()
    log = (folder / f"{node_id}.log").open("ab")
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=log, stderr=log)
    try:
        info = wait_for_ready_file(proc, ready, folder / f"{node_id}.log")
    except RuntimeError:
        proc.kill()
        raise
    admin_secret = folder / "admin.secret"
    admin_secret.write_text(ADMIN.secret_key, encoding="utf-8")
    admin_secret.chmod(0o600)
    return RunningGateway(
        proc, int(info["port"]), int(info["internal_port"]), db_path, admin_secret
    )


def stop_gateway(gateway: RunningGateway) -> None:
    """SIGTERM, then wait (kill after 20 s)."""
    for client in gateway.broker_clients.values():
        client.close()
    gateway.proc.send_signal(signal.SIGTERM)
    try:
        gateway.proc.wait(20)
    except subprocess.TimeoutExpired:
        gateway.proc.kill()
        gateway.proc.wait()


SESSION_IDLE_TIMEOUT_S = 86_400
"""The session gateway's ``serverChannelMaxIdleTimeSeconds``: the cast registers once,
and a test worker may run other modules for minutes between two of this one's tests;
past upstream's 120 s the gateway would close the cast's idle connections and, in
eventual mode, unregister the brokers."""


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    """One real gateway for the session, with broker-a and broker-b registered."""
    folder = tmp_path_factory.mktemp("gateway")
    properties = folder / "namesrv.properties"
    properties.write_text(f"serverChannelMaxIdleTimeSeconds={SESSION_IDLE_TIMEOUT_S}\n")
    running = start_gateway(folder, config=properties)
    try:
        for broker in BROKERS:
            assert running.register(broker, TOPICS) == 0
        yield running
    finally:
        stop_gateway(running)


def node_settings(
    gateway: RunningGateway, node_id: str = "n1", cluster_file: str = ""
) -> dict[str, Any]:
    """settings.NAMESRV pointing the web side at ``gateway``."""
    return {
        "NODE_ID": node_id,
        "MODE": "eventual",
        "HOST": "127.0.0.1",
        "PORT": gateway.port,
        "INTERNAL_PORT": gateway.internal_port,
        "INTERNAL_SECRET": SECRET,
        "CLUSTER_FILE": cluster_file,
        "ACL_ACCESS_KEY": ADMIN.access_key,
        "ACL_SECRET_KEY_FILE": str(gateway.admin_secret_file),
    }


@pytest.fixture
def wired(settings: Any, gateway: RunningGateway) -> RunningGateway:
    """The web side talks to the session gateway."""
    settings.NAMESRV = node_settings(gateway)
    return gateway


def three_node_settings(n1: RunningGateway, n2: RunningGateway, folder: Path) -> dict[str, Any]:
    """settings.NAMESRV of n1 in a cluster file (written to ``folder``) of n1, n2 and an
    n3 that never answers (port 1)."""
    nodes = [
        {
            "id": node_id,
            "host": "127.0.0.1",
            "remoting_port": g.port,
            "internal_port": g.internal_port,
        }
        for node_id, g in (("n1", n1), ("n2", n2))
    ]
    nodes.append({"id": "n3", "host": "127.0.0.1", "remoting_port": 1, "internal_port": 1})
    cluster_file = folder / "cluster.json"
    cluster_file.write_text(json.dumps({"nodes": nodes}))
    return node_settings(n1, cluster_file=str(cluster_file))


@pytest.fixture
def second_node(wired: RunningGateway, settings: Any, tmp_path: Path) -> Iterator[RunningGateway]:
    """n1: the session gateway with broker-a and broker-b (registered again); n2: a real
    gateway that only heard broker-a's master (TopicTest, not DemoOrders); n3: unreachable."""
    wired.register_again(BROKERS, TOPICS)
    other = start_gateway(tmp_path, node_id="n2")
    try:
        # Two topics: a one-topic registration cannot create a broker (5.x's guard).
        assert other.register(BROKERS[0], ("TopicTest", "OnlyOnN2")) == 0
        settings.NAMESRV = three_node_settings(wired, other, tmp_path)
        yield other
    finally:
        stop_gateway(other)
