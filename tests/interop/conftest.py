"""Cast of the interop tests: the installed third-party clients and a running node.

* ``interop_clients``: ali-ons 3.12.0 (npm) and rocketmq 0.4.4 (PyPI, in its own
  venv) installed under ``.cache/interop`` by ``tools/interop_setup.py``. A
  registry that cannot be reached FAILS the tests with the installer's output:
  an interop test that silently skips proves nothing.
* ``namesrv``: a one-node cluster started with the real CLI, with broker-a
  (master and slave) of DefaultCluster registered over the wire for
  ``TopicTest``; the broker connections stay open for the whole session and
  register again every 20 s, as a broker does.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from localcluster.run_secrets import read_run_secrets
from remoting.acl import Credentials
from remoting.blocking import BlockingClient
from tests.integration.cluster_fixtures import (
    make_broker,
    register_broker,
    remoting_addr,
    start_cluster,
    stop_cluster,
)
from tools.interop_setup import InteropClients, InteropSetupError, ensure_clients

INTEROP_TOPIC = "TopicTest"
MASTER_ADDR_PORT = 10911
SLAVE_ADDR_PORT = 10921
REGISTER_PERIOD_S = 20.0


@dataclass(frozen=True, slots=True)
class RunningNamesrv:
    """A node with a registered broker group, as the interop tests see it."""

    addr: str
    topic: str
    master_addr: str
    slave_addr: str
    admin: Credentials
    """The cluster's admin account (``cluster up`` turns the remoting ACL on)."""


@pytest.fixture(scope="session")
def interop_clients() -> InteropClients:
    """Both third-party clients, installed on first use."""
    try:
        return ensure_clients()
    except InteropSetupError as exc:
        pytest.fail(f"the interop clients could not be installed: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningNamesrv]:
    """One running node; broker-a master and slave registered for TopicTest."""
    run_dir = tmp_path_factory.mktemp("interop-cluster")
    summary = start_cluster(run_dir, nodes=1)
    addr = remoting_addr(summary, 0)
    master = make_broker("broker-a", MASTER_ADDR_PORT, 0)
    slave = make_broker("broker-a", SLAVE_ADDR_PORT, 1)
    try:
        with (
            BlockingClient(addr, timeout_s=5.0) as master_conn,
            BlockingClient(addr, timeout_s=5.0) as slave_conn,
        ):
            register_broker(master_conn, master, [INTEROP_TOPIC])
            register_broker(slave_conn, slave, [INTEROP_TOPIC])
            admin = read_run_secrets(run_dir).admin_credentials()
            assert admin is not None
            # Like a real broker, register again periodically: the node's scan drops a
            # broker silent for 120 s, and the interop session outlasts that.
            stop = threading.Event()

            def keep_registering() -> None:
                while not stop.wait(REGISTER_PERIOD_S):
                    register_broker(master_conn, master, [INTEROP_TOPIC])
                    register_broker(slave_conn, slave, [INTEROP_TOPIC])

            registrar = threading.Thread(target=keep_registering, daemon=True)
            registrar.start()
            try:
                yield RunningNamesrv(addr, INTEROP_TOPIC, master.addr, slave.addr, admin)
            finally:
                stop.set()
                registrar.join(timeout=10)
    finally:
        stop_cluster(run_dir)
