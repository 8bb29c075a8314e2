"""The web process's only way to change or freshly read a node: its gateway, over the wire.

Every console form and every API write calls one function here. Each function
builds the standard NameServer request (the same frame ``mqadmin`` would send)
or an internal one (:mod:`gateway.internal`), sends it over loopback with a
blocking remoting client and turns the answer into a value or a clear error:

* :class:`GatewayUnavailable`: the gateway did not answer (HTTP 503);
* :class:`GatewayRefused`: it answered with a non-success code (HTTP 502, remark kept);
* :class:`NotInRaftMode`: a Raft-only operation on an eventual node (HTTP 409).

No domain rule lives here: validation beyond the form's own belongs to the
services, which run inside the gateway.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from gateway.private_codes import STATUS_BROKERS_FIELD, STATUS_BROKERS_WANTED, InternalCode
from namesrv_app.conf import namesrv_settings
from raftstore import vocab
from raftstore.config import (
    NODE_KEYS,
    NamesrvConfig,
    blacklist_reason,
    value_refusal,
)
from remoting import bodies
from remoting.acl import Credentials, load_credentials, sign
from remoting.blocking import BlockingClient
from remoting.client import RemotingClientError
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.consistency import CONSISTENCY_FIELD, CONSISTENCY_LINEARIZABLE
from remoting.errors import BodyDecodeError
from remoting.model import QueueData, TopicRouteData
from remoting.tls import ClientTls

LOOPBACK = "127.0.0.1"
GATEWAY_TIMEOUT_S = 3.0
PEER_TIMEOUT_S = 1.0
PEERS_ASKED_MAX = 16
"""Nodes asked in parallel by a cross-node comparison (a cluster file is small)."""
MODE_RAFT = vocab.MODE_RAFT


class GatewayError(Exception):
    """A gateway operation failed; ``http_status`` is what the API answers."""

    http_status = 502


class GatewayUnavailable(GatewayError):
    """The gateway could not be reached or did not answer in time."""

    http_status = 503


class NoQuorum(GatewayUnavailable):
    """Raft mode: the node could not commit the write within its bound (HTTP 503).

    The write is indeterminate, not refused: it may still commit later.
    """


NO_QUORUM_REMARK_PREFIXES = ("no raft quorum:", "raft replication failed:")
"""How ``gateway.dispatch.replication_remark`` starts its SYSTEM_ERROR remarks."""


class GatewayRefused(GatewayError):
    """The gateway answered with a non-success response code."""

    http_status = 502

    def __init__(self, code: int, remark: str | None) -> None:
        super().__init__(f"gateway answered {code}: {remark or ''}".strip())
        self.code = code
        self.remark = remark


class NotInRaftMode(GatewayError):
    """A membership change was asked of a node that does not run Raft."""

    http_status = 409


@dataclass(frozen=True, slots=True)
class NodeAddress:
    """Where one node of the cluster answers: public remoting and internal ports."""

    node_id: str
    remoting_addr: str
    internal_addr: str | None
    local: bool = False
    raft_addr: str | None = None
    """Raft mode: the node's Raft identity, so the console names a leader or peer by id."""
    console_url: str | None = None
    """Where that node's own console is (a node on another host is shown there in full)."""


# ------------------------------------------------------------------- configuration


def web_setting(name: str, default: Any) -> Any:
    """One key of ``settings.NAMESRV_WEB`` (read on each call so tests can override it)."""
    return (getattr(settings, "NAMESRV_WEB", {}) or {}).get(name, default)


def local_node() -> NodeAddress:
    """This node, from ``settings.NAMESRV`` (the launcher sets PORT and INTERNAL_PORT)."""
    conf = namesrv_settings()
    internal = f"{LOOPBACK}:{conf.INTERNAL_PORT}" if conf.INTERNAL_PORT else None
    return NodeAddress(conf.NODE_ID, f"{LOOPBACK}:{conf.PORT}", internal, local=True)


def cluster_nodes() -> list[NodeAddress]:
    """Every node of the cluster file, this node marked; just this node without a file."""
    conf = namesrv_settings()
    here = local_node()
    if not conf.CLUSTER_FILE:
        return [here]
    try:
        data = json.loads(Path(conf.CLUSTER_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [here]
    parsed = [_node_from_summary(entry, here.node_id) for entry in data.get("nodes", [])]
    nodes = [node for node in parsed if node is not None]
    return nodes if any(node.local for node in nodes) else [here, *nodes]


def _node_from_summary(entry: dict[str, Any], local_id: str) -> NodeAddress | None:
    """A cluster-file node entry (see ``launcher._node_summary``) as a NodeAddress."""
    try:
        host = str(entry.get("host", LOOPBACK))
        remoting = str(entry.get("remoting_addr") or f"{host}:{int(entry['remoting_port'])}")
        internal_port = entry.get("internal_port")
        node_id = str(entry["id"])
    except (KeyError, TypeError, ValueError):
        return None
    internal = f"{LOOPBACK}:{int(internal_port)}" if internal_port else None
    raft = str(entry["raft_addr"]) if entry.get("raft_addr") else None
    console = str(entry["console_url"]) if entry.get("console_url") else None
    return NodeAddress(
        node_id, remoting, internal, local=node_id == local_id, raft_addr=raft, console_url=console
    )


# ------------------------------------------------------------------- transport

_clients = threading.local()


def _client(addr: str, timeout_s: float, internal: bool) -> BlockingClient:
    """A per-thread connection per address (a BlockingClient serialises its calls).
    The internal port (loopback only) is plain; the remoting ports speak TLS when
    NAMESRV_TLS_CONFIG_FILE says so."""
    pool: dict[tuple[str, float], BlockingClient] | None = getattr(_clients, "pool", None)
    if pool is None:
        pool = {}
        _clients.pool = pool
    client = pool.get((addr, timeout_s))
    if client is None:
        tls = ClientTls.PLAIN if internal else ClientTls.PROCESS
        client = BlockingClient(addr, timeout_s=timeout_s, tls=tls)
        pool[(addr, timeout_s)] = client
    return client


@functools.lru_cache(maxsize=4)
def _credentials(access_key: str, secret_file: str) -> Credentials | None:
    return load_credentials(access_key, secret_file)


def signing_credentials() -> Credentials | None:
    """The ACL account this node's processes sign with (settings ACL_ACCESS_KEY and
    ACL_SECRET_KEY_FILE); None when none is configured. Read once per process."""
    conf = namesrv_settings()
    try:
        return _credentials(conf.ACL_ACCESS_KEY, conf.ACL_SECRET_KEY_FILE)
    except ValueError as exc:
        raise GatewayUnavailable(f"this node cannot sign its requests: {exc}") from exc


def invoke(
    addr: str,
    request: RemotingCommand,
    timeout_s: float | None = None,
    *,
    internal: bool = False,
) -> RemotingCommand:
    """Send ``request`` to ``addr`` (``internal``: a node's internal port), signed when
    this node holds an ACL account; GatewayUnavailable when nothing answers."""
    wait_s = float(timeout_s if timeout_s is not None else web_setting("GATEWAY_TIMEOUT_S", 3.0))
    credentials = signing_credentials()
    if credentials is not None:
        request = sign(request, credentials)
    try:
        return _client(addr, wait_s, internal).invoke(request)
    except (RemotingClientError, OSError) as exc:
        raise GatewayUnavailable(f"gateway {addr} unavailable: {exc}") from exc


def expect_success(response: RemotingCommand) -> RemotingCommand:
    """Return a SUCCESS answer; raise the GatewayError that maps its failure to HTTP."""
    if response.code == ResponseCode.SUCCESS:
        return response
    remark = response.remark or ""
    if response.code == ResponseCode.SYSTEM_ERROR and remark.startswith(NO_QUORUM_REMARK_PREFIXES):
        raise NoQuorum(remark)
    raise GatewayRefused(response.code, response.remark)


def _public(request: RemotingCommand) -> RemotingCommand:
    return expect_success(invoke(local_node().remoting_addr, request))


def _internal(
    code: int,
    fields: dict[str, str] | None = None,
    node: NodeAddress | None = None,
    timeout_s: float | None = None,
) -> RemotingCommand:
    target = node or local_node()
    if target.internal_addr is None:
        raise GatewayUnavailable(f"node {target.node_id} has no internal port configured")
    ext = {"secret": namesrv_settings().INTERNAL_SECRET, **(fields or {})}
    request = RemotingCommand.request(int(code), ext)
    return expect_success(invoke(target.internal_addr, request, timeout_s, internal=True))


# ------------------------------------------------------------------- reads


def node_status(
    node: NodeAddress | None = None, timeout_s: float | None = None, *, brokers: bool = False
) -> dict[str, Any]:
    """NODE_STATUS of a node (default: this one): ReplicatorStatus fields + routes_version;
    with ``brokers``, also every broker replica the node knows, as it sees it."""
    fields = {STATUS_BROKERS_FIELD: STATUS_BROKERS_WANTED} if brokers else None
    response = _internal(InternalCode.NODE_STATUS, fields, node=node, timeout_s=timeout_s)
    try:
        status: dict[str, Any] = json.loads(response.body or b"{}")
    except ValueError as exc:
        raise GatewayRefused(int(ResponseCode.SYSTEM_ERROR), f"bad status body: {exc}") from exc
    return status


def member_addrs(timeout_s: float | None = None) -> dict[str, Any]:
    """MEMBER_ADDRS of this node: ``{"members": [raft addr], "remoting": {raft addr:
    remoting addr}}`` (raft mode; both empty in eventual mode)."""
    response = _internal(InternalCode.MEMBER_ADDRS, timeout_s=timeout_s)
    try:
        answer: dict[str, Any] = json.loads(response.body or b"{}")
    except ValueError as exc:
        raise GatewayRefused(int(ResponseCode.SYSTEM_ERROR), f"bad members body: {exc}") from exc
    return answer


def topic_route(
    topic: str,
    *,
    linearizable: bool = False,
    addr: str | None = None,
    timeout_s: float | None = None,
) -> TopicRouteData | None:
    """GET_ROUTEINFO_BY_TOPIC (105) in standard JSON; None when the topic has no route.

    ``linearizable`` adds ext ``consistency=linearizable``: the gateway commits a
    barrier first, so the answer reflects every write committed before the call.
    """
    fields = {"topic": topic, "acceptStandardJsonOnly": "true"}
    if linearizable:
        fields[CONSISTENCY_FIELD] = CONSISTENCY_LINEARIZABLE
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, fields)
    response = invoke(addr or local_node().remoting_addr, request, timeout_s)
    if response.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    expect_success(response)
    try:
        return bodies.decode_topic_route_data(response.body or b"{}")
    except BodyDecodeError as exc:
        raise GatewayRefused(response.code, f"undecodable route body: {exc}") from exc


def get_kv(namespace: str, key: str) -> str | None:
    """GET_KV_CONFIG (101): the value, or None when the item does not exist."""
    request = RemotingCommand.request(
        RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key}
    )
    response = invoke(local_node().remoting_addr, request)
    if response.code == ResponseCode.QUERY_NOT_FOUND:
        return None
    return (expect_success(response).ext_fields or {}).get("value")


BACKUP_TIMEOUT_S = 60.0
"""A backup commits a barrier, then copies, compresses and hashes the whole table."""


def backup(cluster: str) -> bytes:
    """BACKUP of this node (the internal port): the backup file's bytes, named for
    ``cluster`` (raft: read after a barrier; NoQuorum without a quorum)."""
    fields = {"cluster": cluster}
    response = _internal(InternalCode.BACKUP, fields, timeout_s=BACKUP_TIMEOUT_S)
    return response.body or b""


# ------------------------------------------------------------------- writes


class PartialWrite(GatewayError):
    """Eventual mode: the write reached some nodes and failed on others (HTTP 207).

    Never shown as plain success: the message names where it landed and, for each
    node it missed, why; ``outcome`` has the per-node detail.
    """

    http_status = 207

    def __init__(self, message: str, outcome: WriteOutcome) -> None:
        super().__init__(message)
        self.outcome = outcome


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """Where one console or API write landed.

    Raft mode: one write, replicated through the log (``replicated``), answered by this
    node once a majority committed it. Eventual mode: the same request sent to every
    node, as RocketMQ's own tools do for KV config and brokers do for registrations,
    since eventual nodes never forward writes to each other.
    """

    replicated: bool
    answers: tuple[NodeAnswer, ...]

    @property
    def done_on(self) -> list[str]:
        """Ids of the nodes that applied the write."""
        return [a.node.node_id for a in self.answers if a.error is None]

    @property
    def failed(self) -> list[NodeAnswer]:
        """The nodes that did not, with their reasons."""
        return [a for a in self.answers if a.error is not None]

    def response(self) -> RemotingCommand:
        """One successful answer (this node's when it succeeded)."""
        ordered = sorted(self.answers, key=lambda a: not a.node.local)
        answer: RemotingCommand = next(a.value for a in ordered if a.error is None)
        return answer

    def per_node(self) -> list[dict[str, Any]]:
        """``[{"node": id, "ok": bool, "error": reason or None}]`` for the API."""
        return [
            {"node": a.node.node_id, "ok": a.error is None, "error": a.error} for a in self.answers
        ]

    def where(self) -> str:
        """Where it landed, for a sentence."""
        if self.replicated:
            return "(replicated through Raft to every node)"
        return "on " + ", ".join(self.done_on)

    def sentence(self, what: str) -> str:
        """``what`` plus where it landed; PartialWrite when some node missed it."""
        if not self.failed:
            return f"{what} {self.where()}."
        missed = "; ".join(f"{a.node.node_id}: {a.error}" for a in self.failed)
        raise PartialWrite(
            f"{what} only {self.where()}; it FAILED on {len(self.failed)} of "
            f"{len(self.answers)} nodes ({missed}). Retry, or check those nodes.",
            self,
        )


def _write(request: RemotingCommand) -> WriteOutcome:
    """Send a write where it must go (see :class:`WriteOutcome`); the error of this
    node (else of the first node) when it landed nowhere."""
    if namesrv_settings().MODE == MODE_RAFT:
        response = _public(request)
        return WriteOutcome(True, (NodeAnswer(local_node(), response),))
    errors: dict[str, GatewayError] = {}

    def send(node: NodeAddress) -> RemotingCommand:
        try:
            return expect_success(invoke(node.remoting_addr, request))
        except GatewayError as exc:
            errors[node.node_id] = exc
            raise

    answers = tuple(ask_every_node(send))
    outcome = WriteOutcome(False, answers)
    if not outcome.done_on:
        local = next((a for a in answers if a.node.local), answers[0])
        raise errors[local.node.node_id]
    return outcome


def register_topic(topic: str, queue_datas: list[QueueData]) -> WriteOutcome:
    """REGISTER_TOPIC_IN_NAMESRV (217): put these queue datas for ``topic``."""
    body = bodies.encode_topic_route_data(TopicRouteData(queue_datas=queue_datas), standard=True)
    return _write(
        RemotingCommand.request(RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": topic}, body)
    )


def delete_topic(topic: str, cluster_name: str | None = None) -> WriteOutcome:
    """DELETE_TOPIC_IN_NAMESRV (216): the whole topic, or only one cluster's queues."""
    fields = {"topic": topic}
    if cluster_name:
        fields["clusterName"] = cluster_name
    return _write(RemotingCommand.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, fields))


def wipe_write_perm(broker_name: str) -> tuple[int, WriteOutcome]:
    """WIPE_WRITE_PERM_OF_BROKER (205): topics whose write bit was cleared (as this node
    counted them), and where."""
    outcome = _write(
        RemotingCommand.request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": broker_name})
    )
    return int((outcome.response().ext_fields or {}).get("wipeTopicCount", "0")), outcome


def add_write_perm(broker_name: str) -> tuple[int, WriteOutcome]:
    """ADD_WRITE_PERM_OF_BROKER (327): topics set back to read+write, and where."""
    outcome = _write(
        RemotingCommand.request(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": broker_name})
    )
    return int((outcome.response().ext_fields or {}).get("addTopicCount", "0")), outcome


def put_kv(namespace: str, key: str, value: str) -> WriteOutcome:
    """PUT_KV_CONFIG (100)."""
    fields = {"namespace": namespace, "key": key, "value": value}
    return _write(RemotingCommand.request(RequestCode.PUT_KV_CONFIG, fields))


def delete_kv(namespace: str, key: str) -> WriteOutcome:
    """DELETE_KV_CONFIG (102); deleting a missing key succeeds, as upstream."""
    fields = {"namespace": namespace, "key": key}
    return _write(RemotingCommand.request(RequestCode.DELETE_KV_CONFIG, fields))


def unregister_broker(
    cluster_name: str, broker_addr: str, broker_name: str, broker_id: int
) -> WriteOutcome:
    """UNREGISTER_BROKER (104), applied before each gateway answers."""
    fields = {
        "clusterName": cluster_name,
        "brokerAddr": broker_addr,
        "brokerName": broker_name,
        "brokerId": str(broker_id),
    }
    return _write(RemotingCommand.request(RequestCode.UNREGISTER_BROKER, fields))


def namesrv_config(
    node: NodeAddress | None = None, timeout_s: float | None = None
) -> dict[str, str]:
    """GET_NAMESRV_CONFIG (319) of a node (default: this one): its NamesrvConfig, by the
    Java property names."""
    request = RemotingCommand.request(RequestCode.GET_NAMESRV_CONFIG, {})
    response = expect_success(invoke((node or local_node()).remoting_addr, request, timeout_s))
    return bodies.decode_properties(response.body or b"")


def blacklisted_config_keys(config: Mapping[str, str]) -> frozenset[str]:
    """The keys UPDATE_NAMESRV_CONFIG refuses on a node answering ``config``: the same
    rule the gateway applies (``NamesrvConfig.blacklisted_keys``)."""
    black_list = config.get("configBlackList", NamesrvConfig().config_black_list)
    return dataclasses.replace(NamesrvConfig(), config_black_list=black_list).blacklisted_keys()


def config_update_refusal(key: str, value: str, config: Mapping[str, str]) -> str | None:
    """Why ``key=value`` may not be sent to a node answering ``config`` (the sentence
    starts with the key); None if it may. The node would refuse it for the same reason."""
    if key not in config:
        return f"{key} is not a NamesrvConfig property"
    if key in NODE_KEYS:
        return (
            f"{key} is a start-time setting of each node: set it in the node's config file "
            "and restart the node"
        )
    if key in blacklisted_config_keys(config):
        return f"{key} is {blacklist_reason(key)}"
    return value_refusal(key, value)


def every_node_config() -> list[NodeAnswer]:
    """GET_NAMESRV_CONFIG of every node of the cluster file."""
    wait_s = float(web_setting("PEER_TIMEOUT_S", PEER_TIMEOUT_S))
    return ask_every_node(lambda node: namesrv_config(node, timeout_s=wait_s))


def update_namesrv_config(properties: dict[str, str]) -> WriteOutcome:
    """UPDATE_NAMESRV_CONFIG (318) with ``key=value`` lines, where writes go (every node
    in eventual mode). A blacklisted key makes a node refuse the whole update."""
    body = bodies.encode_properties(properties)
    return _write(RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, {}, body))


def _membership(code: InternalCode, address: str) -> dict[str, Any]:
    status = node_status()
    if status.get("mode") != MODE_RAFT:
        raise NotInRaftMode(f"node {status.get('node_id')} is not in raft mode")
    _internal(code, {"address": address})
    return node_status()


def add_node(address: str) -> dict[str, Any]:
    """Add a Raft member (raft mode only); the node status after the change."""
    return _membership(InternalCode.RAFT_ADD_NODE, address)


def remove_node(address: str) -> dict[str, Any]:
    """Remove a Raft member (raft mode only); the node status after the change."""
    return _membership(InternalCode.RAFT_REMOVE_NODE, address)


# ------------------------------------------------------------------- every node


@dataclass(frozen=True, slots=True)
class NodeAnswer:
    """What one node said (``error`` set when it did not answer)."""

    node: NodeAddress
    value: Any = None
    error: str | None = None


def ask_every_node(question: Any, nodes: list[NodeAddress] | None = None) -> list[NodeAnswer]:
    """Call ``question(node)`` for every node in parallel; failures become ``error``."""
    targets = nodes if nodes is not None else cluster_nodes()

    def ask(node: NodeAddress) -> NodeAnswer:
        try:
            return NodeAnswer(node, question(node))
        except GatewayError as exc:
            return NodeAnswer(node, error=str(exc))

    if len(targets) <= 1:
        return [ask(node) for node in targets]
    with ThreadPoolExecutor(max_workers=min(len(targets), PEERS_ASKED_MAX)) as pool:
        return list(pool.map(ask, targets))


def every_node_status(*, brokers: bool = False) -> list[NodeAnswer]:
    """NODE_STATUS of every node of the cluster file (with ``brokers``: each node's
    broker replicas too, :func:`node_status`)."""
    wait_s = float(web_setting("PEER_TIMEOUT_S", PEER_TIMEOUT_S))
    return ask_every_node(lambda node: node_status(node, timeout_s=wait_s, brokers=brokers))


def every_node_route(topic: str) -> list[NodeAnswer]:
    """Each node's own (local) answer to GET_ROUTEINFO_BY_TOPIC for ``topic``."""
    wait_s = float(web_setting("PEER_TIMEOUT_S", PEER_TIMEOUT_S))
    return ask_every_node(
        lambda node: topic_route(topic, addr=node.remoting_addr, timeout_s=wait_s)
    )
