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
after which it registers its table without the topic), SEND_MESSAGE (10), and
for the consumer groups' progress GET_ALL_CONSUMER_OFFSET (43),
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), GET_CONSUMER_CONNECTION_LIST (203) and
GET_MAX_OFFSET (30).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from broker_app.clients import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from broker_app.config import DELETE_TOPIC_IN_BROKER
from localcluster.processes import PidRecord, is_alive, read_pid_file, write_pid_file
from remoting import body_limits
from remoting.acl import Credentials
from remoting.blocking import BlockingClient
from remoting.bodies import decode_kv_table
from remoting.client import RemotingClientError
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import BodyDecodeError
from tools import process_facts

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


class BadBodyError(BrokerControlError):
    """A broker's answer has a body that is not what RocketMQ sends."""


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


@dataclass(frozen=True, slots=True)
class ConsumerClient:
    """One client of a consumer group connected to the broker (``Connection``)."""

    client_id: str
    addr: str
    language: str
    version: int


@dataclass(frozen=True, slots=True)
class ConsumerConnection:
    """A GET_CONSUMER_CONNECTION_LIST answer: the group's clients on this broker, its
    subscriptions (topic -> expression, by topic) and how it consumes."""

    clients: tuple[ConsumerClient, ...] = ()
    subscriptions: tuple[tuple[str, str], ...] = ()
    message_model: str = ""
    consume_type: str = ""


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """A group's progress on one queue: the queue's next offset and the committed one."""

    topic: str
    queue_id: int
    broker_offset: int
    consumer_offset: int

    @property
    def lag(self) -> int:
        """Messages stored but not yet consumed (never negative: a queue deleted and
        recreated may start below an old commit)."""
        return max(0, self.broker_offset - self.consumer_offset)

    @property
    def is_retry(self) -> bool:
        """True for the group's retry topic (``%RETRY%group``)."""
        return self.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)

    @property
    def is_dlq(self) -> bool:
        """True for the group's dead-letter topic (``%DLQ%group``)."""
        return self.topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


@dataclass(frozen=True, slots=True)
class ConsumerGroupInfo:
    """One consumer group as one broker knows it.

    ``clients`` and ``subscriptions`` (topic -> expression) are empty when no client
    of the group is connected to this broker (CONSUMER_NOT_ONLINE); ``queues`` are
    the queues it committed an offset on, ordered by topic (its retry and dead-letter
    topics last) and queue id."""

    name: str
    clients: tuple[ConsumerClient, ...]
    subscriptions: tuple[tuple[str, str], ...]
    queues: tuple[QueueProgress, ...]
    message_model: str = ""
    consume_type: str = ""

    @property
    def online(self) -> bool:
        """True while a client of the group is connected to this broker."""
        return bool(self.clients)

    @property
    def total_lag(self) -> int:
        """The sum of the queues' lag."""
        return sum(queue.lag for queue in self.queues)


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
            [*prefix, *_command(spec, folder)],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    write_pid_file(
        folder / PID_FILE,
        PidRecord(spec.label, proc.pid, process_facts.start_ticks(proc.pid) or 0),
    )
    if wait:
        _wait_ready(folder, proc)
    broker = _local(folder)
    assert broker is not None
    return broker


def _command(spec: BrokerSpec, folder: Path) -> list[str]:
    command = [
        sys.executable,
        "manage.py",
        "run_broker",
        "--migrate",
        "--cluster",
        spec.cluster_name,
        "--broker-name",
        spec.broker_name,
        "--broker-id",
        str(spec.broker_id),
        "--role",
        spec.role,
        "--address",
        spec.addr,
        "--ha-port",
        str(spec.ha_port),
        "--namesrv",
        ";".join(spec.namesrv_addrs),
        "--store-dir",
        str(folder / "store"),
        "--ready-file",
        str(folder / READY_FILE),
    ]
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
    record = read_pid_file(broker.folder / PID_FILE)
    if record is None:
        return False
    os.kill(record.pid, signal.SIGKILL if kill else signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while _alive(record) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    if _alive(record):
        os.kill(record.pid, signal.SIGKILL)
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
    record = read_pid_file(folder / PID_FILE)
    ready: dict[str, Any] = {}
    try:
        ready = dict(json.loads((folder / READY_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        ready = {}
    pid = None if record is None else record.pid
    return LocalBroker(spec, folder, pid, record is not None and _alive(record), ready)


def _alive(record: PidRecord) -> bool:
    """The one rule of the local cluster (same pid, same start time), after reaping the
    broker when this process started it."""
    # Not our child (started by another process): nothing to reap.
    with contextlib.suppress(ChildProcessError):
        finished, _ = os.waitpid(record.pid, os.WNOHANG)
        if finished == record.pid:
            return False
    return is_alive(record)


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
    response = _invoke(
        addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), timeout_s
    )
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


# ------------------------------------------------------------------- consumer groups

_Ask = Callable[[RequestCode, dict[str, str] | None], RemotingCommand]
"""One request on the shared connection: code and header fields -> the answer."""


def consumer_groups(
    addr: str, timeout_s: float = BROKER_TIMEOUT_S, credentials: Credentials | None = None
) -> list[ConsumerGroupInfo]:
    """The consumer groups of one broker (ask a master: a slave's copy lags), by name.

    GET_ALL_CONSUMER_OFFSET (43) and GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) name the
    groups; per group GET_CONSUMER_CONNECTION_LIST (203) gives its clients, and per
    (topic, queue) with a committed offset GET_MAX_OFFSET (30) the queue's next offset.
    Every queue is listed, retry topics included. A group is listed when it committed
    an offset or has a client connected; one the broker only remembers is left out.

    All requests share one connection and ``timeout_s`` in total. BrokerControlError
    when the broker is unreachable, too slow, refuses a request or answers a body that
    is not what RocketMQ sends.
    """
    deadline = time.monotonic() + timeout_s
    try:
        with BlockingClient(addr, timeout_s=timeout_s, credentials=credentials) as client:

            def ask(code: RequestCode, fields: dict[str, str] | None) -> RemotingCommand:
                left_s = deadline - time.monotonic()
                if left_s <= 0:
                    raise BrokerControlError(
                        f"broker {addr} did not answer {code.name} within {timeout_s} s"
                    )
                client.timeout_s = left_s
                return client.invoke(RemotingCommand.request(code, fields))

            return _consumer_groups(addr, ask)
    except BadBodyError as exc:
        raise BadBodyError(f"broker {addr} answered a {exc}") from exc
    except (RemotingClientError, OSError) as exc:
        raise BrokerControlError(f"broker {addr} unavailable: {exc}") from exc


def _consumer_groups(addr: str, ask: _Ask) -> list[ConsumerGroupInfo]:
    offsets = parse_consumer_offsets(
        _body(addr, ask(RequestCode.GET_ALL_CONSUMER_OFFSET, None), "GET_ALL_CONSUMER_OFFSET")
    )
    known = parse_subscription_groups(
        _body(
            addr,
            ask(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, None),
            "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
        )
    )
    max_offsets: dict[tuple[str, int], int] = {}
    groups = []
    for name in sorted(known | {group for _, group in offsets}):
        connection = ask(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": name})
        if connection.code == ResponseCode.CONSUMER_NOT_ONLINE:
            online = ConsumerConnection()
        else:
            online = parse_consumer_connection(
                _body(addr, connection, f"GET_CONSUMER_CONNECTION_LIST of {name}")
            )
        queues = []
        for _, topic, queue_id, committed in sorted(
            (_topic_rank(topic), topic, queue_id, committed)
            for (topic, group), table in offsets.items()
            if group == name
            for queue_id, committed in table.items()
        ):
            if (topic, queue_id) not in max_offsets:
                max_offsets[topic, queue_id] = _max_offset(addr, ask, topic, queue_id)
            queues.append(QueueProgress(topic, queue_id, max_offsets[topic, queue_id], committed))
        if queues or online.clients:
            groups.append(
                ConsumerGroupInfo(
                    name,
                    online.clients,
                    online.subscriptions,
                    tuple(queues),
                    online.message_model,
                    online.consume_type,
                )
            )
    return groups


def _topic_rank(topic: str) -> int:
    """The group's own topics after the ones it subscribed to: retry, then dead-letter."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return 1
    return 2 if topic.startswith(DLQ_GROUP_TOPIC_PREFIX) else 0


def _body(addr: str, response: RemotingCommand, what: str) -> bytes:
    if response.code != ResponseCode.SUCCESS:
        raise BrokerControlError(
            f"broker {addr} refused {what}: {response.remark or response.code}"
        )
    if not response.body:
        raise BrokerControlError(f"broker {addr} answered {what} without a body")
    return response.body


def _max_offset(addr: str, ask: _Ask, topic: str, queue_id: int) -> int:
    response = ask(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)})
    what = f"GET_MAX_OFFSET of {topic} queue {queue_id}"
    if response.code != ResponseCode.SUCCESS:
        raise BrokerControlError(
            f"broker {addr} refused {what}: {response.remark or response.code}"
        )
    try:
        return int((response.ext_fields or {})["offset"])
    except (KeyError, ValueError) as exc:
        raise BrokerControlError(
            f"broker {addr} answered {what} without an integer offset field"
        ) from exc


def _json_object(body: bytes, what: str) -> dict[str, Any]:
    try:
        raw = body_limits.read_json(body, body_limits.ANSWER)
    except BodyDecodeError as exc:  # a refusal past the answer's limits is one too
        raise BadBodyError(f"bad {what} body: {exc}") from exc
    if not isinstance(raw, dict):
        raise BadBodyError(f"bad {what} body: not a JSON object")
    return raw


def _member(
    obj: dict[str, Any], key: str, kind: type[dict[Any, Any]] | type[list[Any]], what: str
) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind):
        json_kind = "object" if kind is dict else "array"
        raise BadBodyError(f"bad {what} body: {key} is not a JSON {json_kind}")
    return value


def parse_consumer_offsets(body: bytes) -> dict[tuple[str, str], dict[int, int]]:
    """A GET_ALL_CONSUMER_OFFSET body (``{"offsetTable":{"topic@group":{0:5}}}``) as
    (topic, group) -> queue id -> committed offset; BrokerControlError when it is not one."""
    what = "GET_ALL_CONSUMER_OFFSET"
    table = _member(_json_object(body, what), "offsetTable", dict, what)
    offsets: dict[tuple[str, str], dict[int, int]] = {}
    for key, queues in table.items():
        topic, at, group = str(key).partition("@")
        if not at or not topic or not group or "@" in group:
            raise BadBodyError(f"bad {what} body: key {key!r} is not topic@group")
        if not isinstance(queues, dict):
            raise BadBodyError(f"bad {what} body: the offsets of {key!r} are not an object")
        try:
            offsets[topic, group] = {
                int(queue_id): _integer(offset) for queue_id, offset in queues.items()
            }
        except (TypeError, ValueError) as exc:
            raise BadBodyError(
                f"bad {what} body: the offsets of {key!r} are not integers by queue id"
            ) from exc
    return offsets


def _integer(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{value!r} is not an integer")
    return value


def parse_subscription_groups(body: bytes) -> set[str]:
    """The group names of a GET_ALL_SUBSCRIPTIONGROUP_CONFIG body
    (``{"subscriptionGroupTable":{"group":{..}}}``); BrokerControlError when it is not one."""
    what = "GET_ALL_SUBSCRIPTIONGROUP_CONFIG"
    table = _member(_json_object(body, what), "subscriptionGroupTable", dict, what)
    return {str(name) for name in table}


def parse_consumer_connection(body: bytes) -> ConsumerConnection:
    """A GET_CONSUMER_CONNECTION_LIST body (``ConsumerConnection``): its clients, its
    subscriptions (topic -> expression, by topic) and its model; BrokerControlError when
    it is not one."""
    what = "GET_CONSUMER_CONNECTION_LIST"
    raw = _json_object(body, what)
    clients = []
    for item in _member(raw, "connectionSet", list, what):
        if not isinstance(item, dict) or not isinstance(item.get("clientId"), str):
            raise BadBodyError(f"bad {what} body: a connection without a clientId")
        version = item.get("version", 0)
        clients.append(
            ConsumerClient(
                item["clientId"],
                str(item.get("clientAddr", "")),
                str(item.get("language", "")),
                version if isinstance(version, int) else 0,
            )
        )
    subscriptions = []
    for topic, sub in _member(raw, "subscriptionTable", dict, what).items():
        if not isinstance(sub, dict):
            raise BadBodyError(f"bad {what} body: the subscription of {topic!r} is not an object")
        subscriptions.append((str(topic), str(sub.get("subString", ""))))
    return ConsumerConnection(
        tuple(sorted(clients, key=lambda c: (c.client_id, c.addr))),
        tuple(sorted(subscriptions)),
        str(raw.get("messageModel", "")),
        str(raw.get("consumeType", "")),
    )
