"""One NameServer node's config file (``node.toml``): parsed, checked, written.

A node on its own host is started from this one file by ``manage.py run_node
--config node.toml``; ``cluster up`` writes one per node (``run/local/n1/node.toml``)
and starts its processes from it the same way, so both go through this module
and :mod:`node.processes`. docs/DEPLOY.md shows a whole file; the keys::

    id = "n1"                       node id: letters, digits, '-' and '_'
    mode = "raft"                   "raft" or "eventual"
    data_dir = "/var/lib/namesrv"   projection database, Raft journal, logs
    cluster_file = ""               member list for the console (default: made from [peers])

    [remoting]  listen = "10.0.0.1:9876"    brokers and clients (RocketMQ remoting)
                read_front = true           route reads from a process of their own
                below_front_nice = 5        gateway's nice steps below its front (0-19)
    [web]       listen = "10.0.0.1:8080"    console, REST API, /healthz, /readyz
                allowed_hosts = ["10.0.0.1"]  workers = 1  profile = "production"
    [internal]  port = 19876                loopback only: this host's web and scan
    [metrics]   listen = "10.0.0.1:9100"    the gateway's Prometheus port (optional)
    [raft]      listen = "10.0.0.1:7101"    the Raft port (raft mode)
                propose_timeout_s = 3.0  skew_allowance_ms = 5000

``listen`` is where a port is bound; ``advertise`` (remoting, web, raft) is the
address the other members and clients are told, by default the same. A Raft
node's advertised address is its identity in the log. Binding every interface
(``0.0.0.0``) is allowed only when it is written, and then ``advertise`` must say
the address peers reach.
    [peers.n2]  remoting = "10.0.0.2:9876"  raft = "10.0.0.2:7101"  web = "10.0.0.2:8080"
    [secrets]   raft_file, django_file, internal_file (default: made in data_dir)
    [acl]       enabled = true  file = "/etc/namesrv/plain_acl.yml"
                access_key = "namesrv-admin"  secret_key_file = "/etc/namesrv/admin.secret"
    [database]  url = "postgresql://namesrv@10.0.0.9/namesrv"   cluster-wide accounts
                password_file = "/etc/namesrv/db.secret"
    [redis]     url = "redis://10.0.0.9:6379/0"  password_file = "..."   (optional)
    [scan]      interval_s = 10
    [namesrv]   config_file = "/etc/namesrv/namesrv.properties"   NamesrvConfig, as -c
    [tls]       mode = "permissive"          remoting port: disabled | permissive | enforcing
                cert_file = "/etc/namesrv/n1.pem"  key_file = "/etc/namesrv/n1.key"
                key_password_file = "..."    (optional) the key's password
                ca_file = "/etc/namesrv/ca.pem"  the CA of the members' certificates
                need_client_auth = "none"    none | optional | require (checked with ca_file)
                web = true                   the web port serves HTTPS with the same pair

Relative paths are relative to the file's folder. The file's shape (sections, keys,
types, ranges) is declared in :mod:`node.config_schema` and checked by msgspec; this
module checks what needs more than one value (addresses, clashing ports, keys one
mode requires). Every problem is reported as one line naming the key
(``node.toml: [raft] listen: '10.0.0.1' is not host:port``); nothing is started
from a file with a problem in it. Reading a file never reads
a secret: the processes read the secret files they are pointed at, so a config
file can be checked (``run_node --check``) by someone who may not see the secrets.
"""

from __future__ import annotations

import ipaddress
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import tomli_w

from gateway.priority import BELOW_FRONT_NICE
from node import config_schema
from node.config_schema import (
    DEFAULT_PROPOSE_TIMEOUT_S,
    DEFAULT_SCAN_INTERVAL_S,
    DEFAULT_SKEW_ALLOWANCE_MS,
    NODE_ID_PATTERN,
    PORT_MAX,
    NodeFile,
)
from node.files import write_secret_file
from raftstore import vocab
from remoting.tls import ClientAuth, TlsMode

RAFT_SCAN_INTERVAL_MS = 1000
"""Raft mode: each gateway scans every second itself (only the leader's scan proposes)."""
T = TypeVar("T")


class NodeConfigError(ValueError):
    """A node config file that cannot be used; the message is one line naming the key."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A ``host:port`` a process listens on (and others reach it at)."""

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Peer:
    """Another member (or this node, when the file lists itself among the peers)."""

    node_id: str
    remoting: Endpoint
    raft: Endpoint | None = None
    web: Endpoint | None = None
    internal_port: int | None = None
    """Only for members on this same host (a local cluster): their loopback internal port."""


@dataclass(frozen=True, slots=True)
class NodeTls:
    """The ``[tls]`` section: one certificate for the node's remoting and web ports."""

    mode: TlsMode = TlsMode.DISABLED
    cert_file: Path | None = None
    key_file: Path | None = None
    key_password_file: Path | None = None
    ca_file: Path | None = None
    """The CA of the members' certificates: the node's own clients check servers against
    it, and with ``need_client_auth`` the remoting port checks clients against it."""
    need_client_auth: ClientAuth = ClientAuth.NONE
    web: bool = False
    """The web port serves HTTPS with ``cert_file`` and ``key_file``."""

    @property
    def clients_use_tls(self) -> bool:
        """Whether this node's own processes speak TLS to the members' remoting ports."""
        return self.mode is not TlsMode.DISABLED


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """Everything one node's processes need, checked."""

    source: Path
    node_id: str
    mode: str
    data_dir: Path
    remoting: Endpoint
    web: Endpoint
    internal_port: int
    raft: Endpoint | None = None
    """This node's Raft identity (the advertised address)."""
    raft_bind_host: str = ""
    """Where the Raft port is bound when it differs from the identity's host."""
    remoting_advertise: Endpoint | None = None
    read_front: bool = True
    """Serve the remoting port from a read front process (gateway/front.py)."""
    below_front_nice: int = BELOW_FRONT_NICE
    """With a read front: nice steps the gateway runs below it (route reads first)."""
    web_advertise: Endpoint | None = None
    propose_timeout_s: float = DEFAULT_PROPOSE_TIMEOUT_S
    skew_allowance_ms: int = DEFAULT_SKEW_ALLOWANCE_MS
    raft_dial: tuple[tuple[str, str], ...] = ()
    """Test harnesses: (peer Raft identity, address dialled instead), e.g. a fault proxy."""
    peers: tuple[Peer, ...] = ()
    metrics: Endpoint | None = None
    web_allowed_hosts: tuple[str, ...] = ()
    web_workers: int = 1
    web_profile: str = "production"
    cluster_file: Path | None = None
    raft_secret_file: Path | None = None
    django_secret_file: Path | None = None
    internal_secret_file: Path | None = None
    acl_enabled: bool = True
    acl_file: Path | None = None
    acl_access_key: str = ""
    acl_secret_key_file: Path | None = None
    database_url: str = ""
    database_password_file: Path | None = None
    redis_url: str = ""
    redis_password_file: Path | None = None
    scan_interval_s: int = DEFAULT_SCAN_INTERVAL_S
    namesrv_config_file: Path | None = None
    """The gateway's NamesrvConfig properties (``run_gateway --config``, upstream's -c)."""
    tls: NodeTls = NodeTls()
    restore_state_file: Path | None = None
    """A backup the gateway starts a new cluster from (``run_node --restore-state``, a
    start option rather than a key of the file; gateway/restore.py)."""

    @property
    def raft_identity(self) -> str:
        """``host:port`` of this node's Raft port, the identity its peers know it by."""
        return str(self.raft) if self.raft else ""

    def raft_members(self) -> tuple[str, ...]:
        """Every member's Raft identity, this node first."""
        others = tuple(str(p.raft) for p in self.peers if p.node_id != self.node_id and p.raft)
        return (self.raft_identity, *others)

    def members(self) -> tuple[Peer, ...]:
        """This node and its peers, this node first (with its own internal port)."""
        me = Peer(
            self.node_id,
            self.remoting_advertise or self.remoting,
            self.raft,
            self.web_advertise or self.web,
            self.internal_port,
        )
        return (me, *(p for p in self.peers if p.node_id != self.node_id))


# ------------------------------------------------------------------- reading


def _fail(source: Path, section: str, key: str, problem: str) -> NodeConfigError:
    place = f"[{section}] {key}".strip() if section else key
    return NodeConfigError(f"{source}: {place}: {problem}")


def _convert(data: Any, kind: type[T], source: Path, at: tuple[str, ...] = ()) -> T:
    """``data`` checked against the schema; NodeConfigError naming the file and the key."""
    try:
        return config_schema.convert(data, kind, at)
    except config_schema.ConfigProblem as exc:
        raise NodeConfigError(f"{source}: {exc}") from None


def parse_endpoint(text: str) -> Endpoint:
    """``host:port`` (``[v6]:port`` for IPv6) as an Endpoint; ValueError saying why not."""
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit():
        raise ValueError(f"{text!r} is not host:port")
    if not 0 < int(port) <= PORT_MAX:
        raise ValueError(f"port {port} of {text!r} is not from 1 to {PORT_MAX}")
    if any(c.isspace() for c in host):
        raise ValueError(f"{text!r} has a space in its host")
    return Endpoint(host, int(port))


def is_wildcard(host: str) -> bool:
    """True for an address that binds every interface (0.0.0.0, ::)."""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _endpoint(
    source: Path, section: str, key: str, text: str | None, *, required: bool
) -> Endpoint | None:
    if text is None:
        if required:
            raise _fail(source, section, key, "is required")
        return None
    try:
        return parse_endpoint(text.strip())
    except ValueError as exc:
        raise _fail(source, section, key, str(exc)) from exc


def _listen_advertise(
    source: Path, section: str, listen_text: str | None, advertise_text: str | None
) -> tuple[Endpoint | None, Endpoint | None]:
    """``listen`` and ``advertise`` of a section; advertise is None when not given,
    and required (never a wildcard itself) when listen binds every interface."""
    listen = _endpoint(source, section, "listen", listen_text, required=False)
    advertise = _endpoint(source, section, "advertise", advertise_text, required=False)
    if advertise is not None and is_wildcard(advertise.host):
        raise _fail(
            source,
            section,
            "advertise",
            f"must be an address others can reach, not {advertise.host}",
        )
    if listen is not None and is_wildcard(listen.host) and advertise is None:
        raise _fail(
            source,
            section,
            "advertise",
            f"is required when listen binds every interface ({listen})",
        )
    return listen, advertise


def _path(source: Path, text: str) -> Path | None:
    """A file named in the config, relative to the config's folder; None when empty."""
    if not text.strip():
        return None
    path = Path(text.strip()).expanduser()
    return path if path.is_absolute() else (source.parent / path).resolve()


def _peers(source: Path, table: dict[str, Any], mode: str) -> tuple[Peer, ...]:
    peers = []
    for node_id, entry in table.items():
        section = f"peers.{node_id}"
        if not NODE_ID_PATTERN.match(node_id):
            raise NodeConfigError(f"{source}: [{section}]: {node_id!r} is not a node id")
        peer = _convert(entry, config_schema.PeerTable, source, ("peers", node_id))
        remoting = _endpoint(source, section, "remoting", peer.remoting, required=True)
        raft = _endpoint(source, section, "raft", peer.raft, required=mode == vocab.MODE_RAFT)
        web = _endpoint(source, section, "web", peer.web, required=False)
        assert remoting is not None
        peers.append(Peer(node_id, remoting, raft, web, peer.internal_port))
    return tuple(peers)


def _dial(source: Path, dial: dict[str, str]) -> tuple[tuple[str, str], ...]:
    for peer, target in dial.items():
        try:
            parse_endpoint(peer)
            parse_endpoint(target)
        except ValueError as exc:
            raise _fail(source, "raft", "dial", str(exc)) from exc
    return tuple(dial.items())


def _tls(source: Path, table: config_schema.TlsTable) -> NodeTls:
    cert, key = _path(source, table.cert_file), _path(source, table.key_file)
    web = cert is not None if table.web is None else table.web
    mode, auth = table.mode, table.need_client_auth
    if (mode is not TlsMode.DISABLED or web) and (cert is None or key is None):
        missing = "cert_file" if cert is None else "key_file"
        raise _fail(source, "tls", missing, f"is required for mode = {mode.value!r} or web = true")
    ca = _path(source, table.ca_file)
    if auth is not ClientAuth.NONE and ca is None:
        raise _fail(source, "tls", "ca_file", f"is required with need_client_auth = {auth.value!r}")
    password = _path(source, table.key_password_file)
    return NodeTls(mode, cert, key, password, ca, auth, web)


def _bound_ports(
    remoting: Endpoint,
    web: Endpoint,
    internal: int,
    raft: Endpoint | None,
    metrics: Endpoint | None,
) -> dict[str, int]:
    ports = {
        "[remoting] listen": remoting.port,
        "[web] listen": web.port,
        "[internal] port": internal,
    }
    if raft is not None:
        ports["[raft] listen"] = raft.port
    if metrics is not None:
        ports["[metrics] listen"] = metrics.port
    return ports


def _check_ports(source: Path, ports: dict[str, int]) -> None:
    if len(set(ports.values())) != len(ports):
        clash = sorted(k for k, v in ports.items() if list(ports.values()).count(v) > 1)
        raise NodeConfigError(f"{source}: {' and '.join(clash)}: both use one port")


def _check_urls(source: Path, doc: NodeFile) -> None:
    database_url, redis_url = doc.database.url.strip(), doc.redis.url.strip()
    if database_url and "://" not in database_url:
        raise _fail(source, "database", "url", f"{database_url!r} is not a database URL")
    if redis_url and not redis_url.startswith(("redis://", "rediss://")):
        raise _fail(source, "redis", "url", f"{redis_url!r} is not a redis:// URL")


def _check_secrets(source: Path, doc: NodeFile) -> None:
    if doc.mode == vocab.MODE_RAFT and not doc.secrets.raft_file.strip():
        raise _fail(
            source,
            "secrets",
            "raft_file",
            "is required in raft mode (every member holds the same cluster secret)",
        )
    if doc.acl.enabled and not doc.acl.file.strip():
        raise _fail(source, "acl", "file", "is required unless [acl] enabled = false")
    if doc.acl.access_key.strip() and not doc.acl.secret_key_file.strip():
        raise _fail(source, "acl", "secret_key_file", "is required with [acl] access_key")


def _raft(source: Path, doc: NodeFile) -> tuple[Endpoint | None, str]:
    """This node's Raft identity (the advertised address) and, when it differs, the
    host its port is bound on."""
    listen, advertise = _listen_advertise(source, "raft", doc.raft.listen, doc.raft.advertise)
    if listen is None and doc.mode == vocab.MODE_RAFT:
        raise _fail(source, "raft", "listen", "is required")
    raft = advertise or listen
    if advertise and listen and advertise.port != listen.port:
        raise _fail(source, "raft", "advertise", f"must keep the port of listen ({listen})")
    return raft, listen.host if listen and listen != raft else ""


def _check_members(
    source: Path, node_id: str, raft: Endpoint | None, peers: tuple[Peer, ...]
) -> None:
    # A raft node with no other member listed is a one-member cluster: what recovery
    # after quorum loss leaves until add-node grows it. A first start of such a file is
    # refused where the Raft folder is known (node/force.py), not here.
    listed_self = [p for p in peers if p.node_id == node_id]
    if listed_self and raft is not None and listed_self[0].raft not in (None, raft):
        raise _fail(source, f"peers.{node_id}", "raft", f"differs from this node's {raft}")


def parse_node_config(data: dict[str, Any], source: Path) -> NodeConfig:
    """A parsed TOML document as a checked NodeConfig; NodeConfigError naming the key."""
    doc = _convert(data, NodeFile, source)
    data_dir = _path(source, doc.data_dir)
    if data_dir is None:
        raise _fail(source, "", "data_dir", "is required")
    remoting, remoting_advertise = _listen_advertise(
        source, "remoting", doc.remoting.listen, doc.remoting.advertise
    )
    web, web_advertise = _listen_advertise(source, "web", doc.web.listen, doc.web.advertise)
    assert remoting is not None and web is not None  # listen is required by the schema
    raft, raft_bind_host = _raft(source, doc)
    peers = _peers(source, doc.peers, doc.mode)
    _check_members(source, doc.id, raft, peers)
    _check_secrets(source, doc)
    metrics = _endpoint(source, "metrics", "listen", doc.metrics.listen, required=False)
    _check_ports(source, _bound_ports(remoting, web, doc.internal.port, raft, metrics))
    _check_urls(source, doc)
    return NodeConfig(
        source=source,
        node_id=doc.id,
        mode=doc.mode,
        data_dir=data_dir,
        cluster_file=_path(source, doc.cluster_file),
        remoting=remoting,
        remoting_advertise=remoting_advertise,
        read_front=doc.remoting.read_front,
        below_front_nice=doc.remoting.below_front_nice,
        web=web,
        web_advertise=web_advertise,
        web_allowed_hosts=tuple(doc.web.allowed_hosts),
        web_workers=doc.web.workers,
        web_profile=doc.web.profile,
        internal_port=doc.internal.port,
        metrics=metrics,
        raft=raft,
        raft_bind_host=raft_bind_host,
        propose_timeout_s=doc.raft.propose_timeout_s,
        skew_allowance_ms=doc.raft.skew_allowance_ms,
        raft_dial=_dial(source, doc.raft.dial),
        peers=peers,
        raft_secret_file=_path(source, doc.secrets.raft_file),
        django_secret_file=_path(source, doc.secrets.django_file),
        internal_secret_file=_path(source, doc.secrets.internal_file),
        acl_enabled=doc.acl.enabled,
        acl_file=_path(source, doc.acl.file),
        acl_access_key=doc.acl.access_key.strip(),
        acl_secret_key_file=_path(source, doc.acl.secret_key_file),
        database_url=doc.database.url.strip(),
        database_password_file=_path(source, doc.database.password_file),
        redis_url=doc.redis.url.strip(),
        redis_password_file=_path(source, doc.redis.password_file),
        scan_interval_s=doc.scan.interval_s,
        namesrv_config_file=_path(source, doc.namesrv.config_file),
        tls=_tls(source, doc.tls),
    )


def load_node_config(path: str | Path) -> NodeConfig:
    """Read and check the node config file at ``path``; NodeConfigError, one line, if bad."""
    source = Path(path).expanduser().resolve()
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise NodeConfigError(f"{source}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise NodeConfigError(f"{source}: not UTF-8 text ({exc.reason})") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise NodeConfigError(f"{source}: not valid TOML: {exc}") from exc
    return parse_node_config(data, source)


# ------------------------------------------------------------------- writing


def node_config_document(config: NodeConfig) -> dict[str, Any]:
    """The TOML document of ``config`` (what :func:`parse_node_config` reads back)."""
    doc: dict[str, Any] = {
        "id": config.node_id,
        "mode": config.mode,
        "data_dir": str(config.data_dir),
    }
    if config.cluster_file:
        doc["cluster_file"] = str(config.cluster_file)
    doc["remoting"] = _listen_document(config.remoting, config.remoting_advertise)
    doc["remoting"]["read_front"] = config.read_front
    doc["remoting"]["below_front_nice"] = config.below_front_nice
    doc["web"] = _listen_document(config.web, config.web_advertise)
    doc["web"] |= {"workers": config.web_workers, "profile": config.web_profile}
    if config.web_allowed_hosts:
        doc["web"]["allowed_hosts"] = list(config.web_allowed_hosts)
    doc["internal"] = {"port": config.internal_port}
    if config.metrics:
        doc["metrics"] = {"listen": str(config.metrics)}
    if config.raft:
        listen = (
            Endpoint(config.raft_bind_host, config.raft.port)
            if config.raft_bind_host
            else config.raft
        )
        doc["raft"] = _listen_document(listen, config.raft if listen != config.raft else None)
        doc["raft"] |= {
            "propose_timeout_s": config.propose_timeout_s,
            "skew_allowance_ms": config.skew_allowance_ms,
        }
        if config.raft_dial:
            doc["raft"]["dial"] = dict(config.raft_dial)
    doc["peers"] = {p.node_id: _peer_document(p) for p in config.peers}
    secrets = {
        "raft_file": config.raft_secret_file,
        "django_file": config.django_secret_file,
        "internal_file": config.internal_secret_file,
    }
    doc["secrets"] = {k: str(v) for k, v in secrets.items() if v}
    doc["acl"] = {"enabled": config.acl_enabled}
    acl = {"file": config.acl_file, "secret_key_file": config.acl_secret_key_file}
    doc["acl"] |= {k: str(v) for k, v in acl.items() if v}
    if config.acl_access_key:
        doc["acl"]["access_key"] = config.acl_access_key
    for section, url, password in (
        ("database", config.database_url, config.database_password_file),
        ("redis", config.redis_url, config.redis_password_file),
    ):
        if url:
            doc[section] = {"url": url, **({"password_file": str(password)} if password else {})}
    doc["scan"] = {"interval_s": config.scan_interval_s}
    if config.namesrv_config_file:
        doc["namesrv"] = {"config_file": str(config.namesrv_config_file)}
    tls = config.tls
    if tls != NodeTls():
        files = {
            "cert_file": tls.cert_file,
            "key_file": tls.key_file,
            "key_password_file": tls.key_password_file,
            "ca_file": tls.ca_file,
        }
        doc["tls"] = {
            "mode": tls.mode.value,
            "need_client_auth": tls.need_client_auth.value,
            "web": tls.web,
            **{k: str(v) for k, v in files.items() if v},
        }
    return doc


def _listen_document(listen: Endpoint, advertise: Endpoint | None) -> dict[str, Any]:
    doc = {"listen": str(listen)}
    if advertise is not None:
        doc["advertise"] = str(advertise)
    return doc


def _peer_document(peer: Peer) -> dict[str, Any]:
    entry: dict[str, Any] = {"remoting": str(peer.remoting)}
    if peer.raft:
        entry["raft"] = str(peer.raft)
    if peer.web:
        entry["web"] = str(peer.web)
    if peer.internal_port:
        entry["internal_port"] = peer.internal_port
    return entry


def write_node_config(config: NodeConfig, path: Path, header: str = "") -> Path:
    """Write ``config`` as TOML at ``path`` (mode 0600: it names the secret files)."""
    write_secret_file(path, header + tomli_w.dumps(node_config_document(config)))
    return path
