"""Real ``manage.py run_gateway`` processes for the integration tests, and wire helpers.

Each gateway runs in its own process on port 0 with its own SQLite file; the
ready file tells the test which ports it got. Brokers and clients are the
project's blocking remoting client speaking real frames over TCP. Every gateway
runs with the remoting ACL and the test accounts of :func:`write_test_acl`:
admin writes go through :meth:`GatewayProcess.admin_client`, which signs.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localcluster.argv import GatewayArgs
from node.files import write_secret_file
from remoting import register_body
from remoting.acl import Credentials
from remoting.acl_policy import Account, AclConfig, dump_acl
from remoting.blocking import BlockingClient
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.model import DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from tests.waiting import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
SECRET = "integration-secret"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
WAIT_S = 10.0
"""How long a test waits for a gateway to show a change it made."""
NODE_STATUS = 40002
SCAN_NOT_ACTIVE_BROKER = 40001
CLUSTER = "DefaultCluster"
BROKER = "broker-a"
MASTER_ADDR = "127.0.0.1:10911"
MASTER_HA = "127.0.0.1:10912"
SLAVE_ADDR = "127.0.0.1:10921"
SLAVE_HA = "127.0.0.1:10922"
TOPICS = ("TopicTest", "TopicOther")
ADMIN = Credentials("test-admin", "test-admin-secret-key")
BROKER_ACCOUNT = Credentials("test-broker", "test-broker-secret-key")
ACL_FILE_NAME = "plain_acl.yml"


def config_args(folder: Path, **properties: str) -> tuple[str, str]:
    """``--config`` with a NameServer properties file of ``properties`` in ``folder``
    (e.g. ``deleteTopicWithBrokerRegistration="true"``)."""
    path = folder / "namesrv.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in properties.items()), encoding="utf-8")
    return ("--config", str(path))


def write_test_acl(folder: Path) -> Path:
    """The tests' accounts file: an admin and a broker account, loopback white-listed."""
    accounts = (
        Account(ADMIN.access_key, ADMIN.secret_key, admin=True),
        Account(BROKER_ACCOUNT.access_key, BROKER_ACCOUNT.secret_key),
    )
    config = AclConfig({a.access_key: a for a in accounts}, AclConfig.default().global_white_list)
    path = folder / ACL_FILE_NAME
    write_secret_file(path, dump_acl(config))  # it holds secret keys: mode 0600
    return path


@dataclass
class GatewayProcess:
    """A running gateway: its process, ports and database file."""

    node_id: str
    db_path: Path
    ready_file: Path
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    info: dict[str, Any] = field(default_factory=dict)
    extra_args: tuple[str, ...] = ()
    with_test_acl: bool = True
    """Start with ``--acl-file`` of :func:`write_test_acl` (False: the command's default)."""
    extra_env: dict[str, str] = field(default_factory=dict)
    preexec: Callable[[], None] | None = None
    """Run in the child before the gateway starts (e.g. a lower descriptor limit)."""

    @property
    def addr(self) -> str:
        """The public remoting address."""
        return f"127.0.0.1:{self.info['port']}"

    @property
    def internal_addr(self) -> str:
        """The internal (loopback, secret) address."""
        return f"127.0.0.1:{self.info['internal_port']}"

    def start(self, *, migrate: bool = True) -> GatewayProcess:
        """Start the process and wait for its ready file."""
        self.ready_file.unlink(missing_ok=True)
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "namesrv_site.settings",
            "NAMESRV_DB_PATH": str(self.db_path),
            "NAMESRV_INTERNAL_SECRET": SECRET,
            "NAMESRV_LOG_LEVEL": "WARNING",
            **self.extra_env,
        }
        args = GatewayArgs(
            node=self.node_id,
            port=0,
            internal_port=0,
            ready_file=self.ready_file,
            migrate=migrate,
            acl_file=write_test_acl(self.db_path.parent) if self.with_test_acl else None,
            # The tests send the scans they want; the gateway must not add its own
            # (extra_args may turn the fallback back on: the last flag wins).
            scan_fallback_s=0,
        )
        command = [*args.argv(), *self.extra_args]
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                command, cwd=REPO_ROOT, env=env, stdout=log, stderr=log, preexec_fn=self.preexec
            )
        self.info = wait_for_ready_file(self.proc, self.ready_file, self.log_path)
        return self

    def terminate(self) -> int:
        """SIGTERM and wait; the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def client(self, timeout_s: float = 5.0) -> BlockingClient:
        """A new connection to the public port."""
        return BlockingClient(self.addr, timeout_s=timeout_s)

    def admin_client(self, timeout_s: float = 5.0) -> BlockingClient:
        """A new connection to the public port that signs as the test admin."""
        return BlockingClient(self.addr, timeout_s=timeout_s, credentials=ADMIN)

    def node_status(self) -> dict[str, Any]:
        """NODE_STATUS over the internal port."""
        with BlockingClient(self.internal_addr) as client:
            response = client.invoke(RemotingCommand.request(NODE_STATUS, {"secret": SECRET}))
        assert response.code == 0 and response.body is not None, response
        status: dict[str, Any] = json.loads(response.body)
        return status

    def db_rows(self, sql: str) -> list[tuple[Any, ...]]:
        """Rows of a query against the node's projection database."""
        with sqlite3.connect(self.db_path) as db:
            return list(db.execute(sql))

    def wait_for_projection(self, timeout_s: float = 10.0) -> dict[str, Any]:
        """Wait until the projection's NodeState reflects the table's version and digest."""
        seen: dict[str, Any] = {}

        def caught_up() -> dict[str, Any] | None:
            seen["table"] = status = self.node_status()
            seen["projection"] = rows = self.db_rows(
                "select applied_version, digest from namesrv_app_nodestate where node_id = "
                f"'{self.node_id}'"
            )
            return (
                status
                if rows and rows[0] == (status["applied_version"], status["digest"])
                else None
            )

        return wait_until(
            caught_up,
            what=lambda: (
                f"projection at {seen['projection']} equal to the table at {seen['table']}"
            ),
            timeout_s=timeout_s,
        )


def register_request(
    broker_id: int, addr: str, ha: str, *, version: int = 479, crc: int | None = None
) -> RemotingCommand:
    """A real 5.x REGISTER_BROKER frame: RegisterBrokerBody JSON with the masked crc32."""
    wrapper = TopicConfigSerializeWrapper(
        data_version=DataVersion(timestamp=1_700_000_000_000, counter=1),
        topic_config_table={t: TopicConfig(t, 4, 4) for t in TOPICS},
    )
    body = register_body.encode_register_broker_body(
        RegisterBrokerBody(wrapper, []), compressed=False
    )
    checksum = zlib.crc32(body) & 0x7FFFFFFF if crc is None else crc
    fields = {
        "brokerName": BROKER,
        "brokerAddr": addr,
        "clusterName": CLUSTER,
        "haServerAddr": ha,
        "brokerId": str(broker_id),
        "enableActingMaster": "false",
        "compressed": "false",
        "bodyCrc32": str(checksum),
    }
    return RemotingCommand.request(RequestCode.REGISTER_BROKER, fields, body, version=version)


def route_request(topic: str, version: int) -> RemotingCommand:
    """GET_ROUTEINFO_BY_TOPIC as a client of ``version`` sends it."""
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, version=version
    )


def wait_for_ready_file(
    proc: subprocess.Popen[bytes], ready_file: Path, log_path: Path
) -> dict[str, Any]:
    """The gateway's ready file, once ``proc`` wrote it; RuntimeError("gateway did not
    start") with the log when the process exits first or READY_TIMEOUT_S passes."""

    def started() -> bool:
        if ready_file.exists():
            return True
        assert proc.poll() is None, "the gateway exited"
        return False

    try:
        wait_until(started, what=f"the ready file {ready_file}", timeout_s=READY_TIMEOUT_S)
    except AssertionError as exc:
        raise RuntimeError(f"gateway did not start ({exc}):\n{log_path.read_text()}") from None
    info: dict[str, Any] = json.loads(ready_file.read_text())
    return info
