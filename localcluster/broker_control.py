"""Real brokers of the local cluster: start, stop and ask them things over the wire.

Plain functions, shared by the launcher (``cluster up --demo`` starts the
demo's broker groups) and the console's Brokers page (runtime info, topic and
test-message forms, stop and start).

Layout under the run folder: ``brokers/<label>/`` holds ``spec.json`` (what
to start, so a stopped broker can be started again), ``ready.json`` (written
by ``run_broker``: pid, ports, role), ``broker.pid``, ``broker.log``, the
store and the broker's SQLite file. A label is ``<brokerName>-<brokerId>``.

The broker requests are the ones RocketMQ's admin tools send:
GET_BROKER_RUNTIME_INFO (28), UPDATE_AND_CREATE_TOPIC (17, after which the
broker registers the topic with its NameServers), DELETE_TOPIC_IN_BROKER (215,
after which it registers its table without the topic) and SEND_MESSAGE (10).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from broker_app.config import DELETE_TOPIC_IN_BROKER
from remoting.acl import Credentials
from remoting.blocking import BlockingClient
from remoting.bodies import decode_kv_table
from remoting.client import RemotingClientError
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand

BROKERS_DIR = "brokers"
SPEC_FILE = "spec.json"
READY_FILE = "ready.json"
PID_FILE = "broker.pid"
LOG_FILE = "broker.log"
BROKER_TIMEOUT_S = 3.0
DELETE_TIMEOUT_S = 5.0
"""A deleting broker answers after its re-registration (at most ~2 s of it)."""
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
POLL_S = 0.1
TEST_PRODUCER_GROUP = "CONSOLE_TEST_PG"
REPO_ROOT = Path(__file__).resolve().parents[1]


class BrokerControlError(RuntimeError):
    """A broker could not be reached, started or stopped; the text says why."""


@dataclass(frozen=True, slots=True)
class BrokerSpec:
    """What ``manage.py run_broker`` needs to (re)start one broker of the local cluster."""

    broker_name: str
    broker_id: int
    port: int
    ha_port: int
    namesrv_addrs: tuple[str, ...]
    cluster_name: str = "DefaultCluster"
    host: str = "127.0.0.1"
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``<brokerName>-<brokerId>``: the broker's folder name."""
        return f"{self.broker_name}-{self.broker_id}"

    @property
    def addr(self) -> str:
        """The remoting address."""
        return f"{self.host}:{self.port}"

    @property
    def role(self) -> str:
        """The configured role (id 0 is the master)."""
        return "ASYNC_MASTER" if self.broker_id == 0 else "SLAVE"


@dataclass(frozen=True, slots=True)
class LocalBroker:
    """One broker folder of the run: its spec and whether its process is alive."""

    spec: BrokerSpec
    folder: Path
    pid: int | None
    running: bool
    ready: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SendOutcome:
    """A SEND_MESSAGE answer: the response code and, when stored, its message id."""

    code: int
    remark: str | None
    msg_id: str | None
    queue_id: str | None


# ------------------------------------------------------------------- processes


def brokers_dir(run_dir: Path) -> Path:
    """Where the run keeps its brokers."""
    return run_dir / BROKERS_DIR


def start_broker(
    run_dir: Path, spec: BrokerSpec, *, wait: bool = True, prefix: Sequence[str] = ()
) -> LocalBroker:
    """Start ``spec`` as a ``run_broker`` process (its spec is saved for later restarts).

    ``prefix`` goes before the command, e.g. ``ip netns exec HOST`` to start the
    broker on another (test) host.
    """
    folder = brokers_dir(run_dir) / spec.label
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SPEC_FILE).write_text(json.dumps(asdict(spec), sort_keys=True), encoding="utf-8")
    current = _local(folder)
    if current is not None and current.running:
        raise BrokerControlError(f"{spec.label} is already running (pid {current.pid})")
    (folder / READY_FILE).unlink(missing_ok=True)
    env = {**os.environ, "NAMESRV_DB_PATH": str(folder / "broker.sqlite3")}
    with (folder / LOG_FILE).open("ab") as log:
        proc = subprocess.Popen(
            [*prefix, *_command(spec, folder)], cwd=REPO_ROOT, env=env, stdout=log, stderr=log,
            start_new_session=True,
        )  # fmt: skip
    (folder / PID_FILE).write_text(str(proc.pid), encoding="utf-8")
    if wait:
        _wait_ready(folder, proc)
    broker = _local(folder)
    assert broker is not None
    return broker


def _command(spec: BrokerSpec, folder: Path) -> list[str]:
    command = [
        sys.executable, "manage.py", "run_broker", "--migrate",
        "--cluster", spec.cluster_name, "--broker-name", spec.broker_name,
        "--broker-id", str(spec.broker_id), "--role", spec.role,
        "--address", spec.addr, "--ha-port", str(spec.ha_port),
        "--namesrv", ";".join(spec.namesrv_addrs), "--store-dir", str(folder / "store"),
        "--ready-file", str(folder / READY_FILE),
    ]  # fmt: skip
    for key, value in sorted(spec.settings.items()):
        command += ["--set", f"{key}={value}"]
    return command


def _wait_ready(folder: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not (folder / READY_FILE).exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = (folder / LOG_FILE).read_text(errors="replace")[-2000:]
            raise BrokerControlError(f"broker in {folder.name} did not start:\n{tail}")
        time.sleep(POLL_S)


def restart_broker(run_dir: Path, label: str) -> LocalBroker:
    """Start a stopped broker again from its saved spec."""
    broker = _local(brokers_dir(run_dir) / label)
    if broker is None:
        raise BrokerControlError(f"no broker {label!r} in this run")
    return start_broker(run_dir, broker.spec)


def stop_broker(run_dir: Path, label: str, *, kill: bool = False) -> bool:
    """SIGTERM (graceful: it unregisters) or SIGKILL one broker; False if it was not running."""
    broker = _local(brokers_dir(run_dir) / label)
    if broker is None:
        raise BrokerControlError(f"no broker {label!r} in this run")
    if not broker.running or broker.pid is None:
        return False
    os.kill(broker.pid, signal.SIGKILL if kill else signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while _alive(broker.pid) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    if _alive(broker.pid):
        os.kill(broker.pid, signal.SIGKILL)
    (broker.folder / READY_FILE).unlink(missing_ok=True)
    return True


def local_brokers(run_dir: Path) -> list[LocalBroker]:
    """Every broker folder of the run, ordered by label."""
    root = brokers_dir(run_dir)
    if not root.is_dir():
        return []
    found = (_local(folder) for folder in sorted(root.iterdir()) if folder.is_dir())
    return [broker for broker in found if broker is not None]


def _local(folder: Path) -> LocalBroker | None:
    try:
        raw = json.loads((folder / SPEC_FILE).read_text(encoding="utf-8"))
        spec = BrokerSpec(**{**raw, "namesrv_addrs": tuple(raw["namesrv_addrs"])})
    except (OSError, ValueError, TypeError, KeyError):
        return None
    pid = _read_pid(folder)
    ready: dict[str, Any] = {}
    try:
        ready = dict(json.loads((folder / READY_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        ready = {}
    return LocalBroker(spec, folder, pid, pid is not None and _alive(pid), ready)


def _read_pid(folder: Path) -> int | None:
    try:
        return int((folder / PID_FILE).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    # Not our child (started by another process): ask the kernel below.
    with contextlib.suppress(ChildProcessError):
        finished, _ = os.waitpid(pid, os.WNOHANG)
        if finished == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] == "Z"


# ------------------------------------------------------------------- wire requests


def _invoke(
    addr: str,
    request: RemotingCommand,
    timeout_s: float,
    credentials: Credentials | None = None,
) -> RemotingCommand:
    try:
        with BlockingClient(addr, timeout_s=timeout_s, credentials=credentials) as client:
            return client.invoke(request)
    except (RemotingClientError, OSError) as exc:
        raise BrokerControlError(f"broker {addr} unavailable: {exc}") from exc


def runtime_info(addr: str, timeout_s: float = BROKER_TIMEOUT_S) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO (28): the broker's KVTable of offsets, role and HA state."""
    response = _invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO),
                       timeout_s)  # fmt: skip
    if response.code != ResponseCode.SUCCESS or response.body is None:
        raise BrokerControlError(f"broker {addr} answered {response.code}: {response.remark}")
    return dict(decode_kv_table(response.body).table)


def create_topic(
    addr: str,
    topic: str,
    *,
    read_queue_nums: int,
    write_queue_nums: int,
    perm: int,
    timeout_s: float = BROKER_TIMEOUT_S,
    credentials: Credentials | None = None,
) -> None:
    """UPDATE_AND_CREATE_TOPIC (17) on one broker; it then registers the topic itself.

    The broker's ACL wants an admin's signature for it: ``credentials``."""
    fields = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": str(read_queue_nums),
        "writeQueueNums": str(write_queue_nums),
        "perm": str(perm),
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }
    request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
    response = _invoke(addr, request, timeout_s, credentials)
    if response.code != ResponseCode.SUCCESS:
        raise BrokerControlError(f"broker {addr} refused the topic: {response.remark}")


def delete_topic(
    addr: str,
    topic: str,
    credentials: Credentials | None = None,
    *,
    timeout_s: float = DELETE_TIMEOUT_S,
) -> None:
    """DELETE_TOPIC_IN_BROKER (215) on one broker, master or slave: it drops the topic,
    its offsets and consume queues and registers again. Deleting a topic the broker
    does not have succeeds; a system topic is refused.

    The broker's ACL wants an admin's signature for it: ``credentials``."""
    request = RemotingCommand.request(DELETE_TOPIC_IN_BROKER, {"topic": topic})
    response = _invoke(addr, request, timeout_s, credentials)
    if response.code != ResponseCode.SUCCESS:
        raise BrokerControlError(
            f"broker {addr} refused to delete the topic: {response.remark or response.code}"
        )


def send_test_message(
    addr: str, topic: str, body: bytes, *, timeout_s: float = BROKER_TIMEOUT_S
) -> SendOutcome:
    """SEND_MESSAGE (10) of one message with tag ``console`` to any queue of ``topic``."""
    fields = {
        "producerGroup": TEST_PRODUCER_GROUP,
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "-1",
        "sysFlag": "0",
        "bornTimestamp": str(time.time_ns() // 1_000_000),
        "flag": "0",
        "properties": "TAGS\u0001console\u0002WAIT\u0001true\u0002",
        "reconsumeTimes": "0",
        "unitMode": "false",
        "batch": "false",
    }
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, fields, body)
    response = _invoke(addr, request, timeout_s)
    ext = response.ext_fields or {}
    return SendOutcome(response.code, response.remark, ext.get("msgId"), ext.get("queueId"))
