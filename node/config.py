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

Relative paths are relative to the file's folder. Every problem is reported as one
line naming the key (``node.toml: [raft] listen: '10.0.0.1' is not host:port``);
nothing is started from a file with a problem in it. Reading a file never reads
a secret: the processes read the secret files they are pointed at, so a config
file can be checked (``run_node --check``) by someone who may not see the secrets.
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from gateway.front import BELOW_FRONT_NICE, NICE_STEPS_MAX
from node.files import write_secret_file
from raftstore import vocab
from remoting.tls import ClientAuth, TlsMode

PORT_MAX = 65535
NODE_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
WEB_PROFILES = ("development", "production")
WORKERS_MAX = 64
DEFAULT_SCAN_INTERVAL_S = 10
DEFAULT_PROPOSE_TIMEOUT_S = 3.0
DEFAULT_SKEW_ALLOWANCE_MS = 5000
RAFT_SCAN_INTERVAL_MS = 1000
"""Raft mode: each gateway scans every second itself (only the leader's scan proposes)."""

SECTIONS: dict[str, tuple[str, ...]] = {
    "": ("id", "mode", "data_dir", "cluster_file"),
    "remoting": ("listen", "advertise", "read_front", "below_front_nice"),
    "web": ("listen", "advertise", "allowed_hosts", "workers", "profile"),
    "internal": ("port",),
    "metrics": ("listen",),
    "raft": ("listen", "advertise", "propose_timeout_s", "skew_allowance_ms", "dial"),
    "secrets": ("raft_file", "django_file", "internal_file"),
    "acl": ("enabled", "file", "access_key", "secret_key_file"),
    "database": ("url", "password_file"),
    "redis": ("url", "password_file"),
    "scan": ("interval_s",),
    "namesrv": ("config_file",),
    "tls": (
        "mode",
        "cert_file",
        "key_file",
        "key_password_file",
        "ca_file",
        "need_client_auth",
        "web",
    ),
}
PEER_KEYS = ("remoting", "raft", "web", "internal_port")


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


def _where(section: str, key: str) -> str:
    return f"[{section}] {key}" if section else key


def _fail(source: Path, section: str, key: str, problem: str) -> NodeConfigError:
    return NodeConfigError(f"{source}: {_where(section, key)}: {problem}")


class _Reader:
    """Typed access to one parsed file; every failure names the file and the key."""

    def __init__(self, source: Path, data: dict[str, Any]) -> None:
        self.source = source
        self.data = data

    def fail(self, section: str, key: str, problem: str) -> NodeConfigError:
        return _fail(self.source, section, key, problem)

    def table(self, section: str) -> dict[str, Any]:
        value = self.data.get(section, {}) if section else self.data
        if not isinstance(value, dict):
            raise NodeConfigError(f"{self.source}: [{section}] must be a table")
        return value

    def raw(self, section: str, key: str) -> Any:
        return self.table(section).get(key)

    def string(self, section: str, key: str, default: str | None = None) -> str:
        value = self.raw(section, key)
        if value is None:
            if default is None:
                raise self.fail(section, key, "is required")
            return default
        if not isinstance(value, str):
            raise self.fail(section, key, f"must be a string, not {value!r}")
        return value.strip()

    def integer(self, section: str, key: str, default: int, low: int, high: int) -> int:
        value = self.raw(section, key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.fail(
                section, key, f"must be a whole number from {low} to {high}, not {value!r}"
            )
        return value

    def number(self, section: str, key: str, default: float, low: float, high: float) -> float:
        value = self.raw(section, key)
        if value is None:
            return default
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not (low <= value <= high)
        ):
            raise self.fail(
                section, key, f"must be a number from {low:g} to {high:g}, not {value!r}"
            )
        return float(value)

    def boolean(self, section: str, key: str, default: bool) -> bool:
        value = self.raw(section, key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(section, key, f"must be true or false, not {value!r}")
        return value

    def listen_advertise(
        self, section: str, *, required: bool = True
    ) -> tuple[Endpoint | None, Endpoint | None]:
        """``listen`` and ``advertise`` of a section; advertise is None when not given,
        and required (never a wildcard itself) when listen binds every interface."""
        listen = self.endpoint(section, "listen", required=required)
        advertise = self.endpoint(section, "advertise", required=False)
        if advertise is not None and is_wildcard(advertise.host):
            raise self.fail(
                section, "advertise", f"must be an address others can reach, not {advertise.host}"
            )
        if listen is not None and is_wildcard(listen.host) and advertise is None:
            raise self.fail(
                section, "advertise", f"is required when listen binds every interface ({listen})"
            )
        return listen, advertise

    def endpoint(self, section: str, key: str, *, required: bool = True) -> Endpoint | None:
        value = self.raw(section, key)
        if value is None and not required:
            return None
        text = self.string(section, key)
        try:
            return parse_endpoint(text)
        except ValueError as exc:
            raise self.fail(section, key, str(exc)) from exc

    def path(self, section: str, key: str) -> Path | None:
        text = self.string(section, key, "")
        if not text:
            return None
        path = Path(text).expanduser()
        return path if path.is_absolute() else (self.source.parent / path).resolve()

    def strings(self, section: str, key: str) -> tuple[str, ...]:
        value = self.raw(section, key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(section, key, f"must be a list of non-empty strings, not {value!r}")
        return tuple(value)


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


def _unknown_keys(reader: _Reader) -> None:
    for key in reader.data:
        if isinstance(reader.data[key], dict) and key not in SECTIONS and key != "peers":
            raise NodeConfigError(f"{reader.source}: [{key}]: unknown section")
    for section, keys in SECTIONS.items():
        table = reader.table(section)
        for key in table:
            if section == "" and (key in SECTIONS or key == "peers"):
                continue
            if key not in keys:
                known = ", ".join(keys)
                raise reader.fail(section, key, f"unknown key (known here: {known})")


def _peers(reader: _Reader, mode: str) -> tuple[Peer, ...]:
    table = reader.table("peers")
    peers = []
    for node_id, entry in table.items():
        section = f"peers.{node_id}"
        if not NODE_ID_PATTERN.match(node_id):
            raise NodeConfigError(f"{reader.source}: [{section}]: {node_id!r} is not a node id")
        if not isinstance(entry, dict):
            raise NodeConfigError(f"{reader.source}: [{section}] must be a table")
        for key in entry:
            if key not in PEER_KEYS:
                raise reader.fail(section, key, f"unknown key (known: {', '.join(PEER_KEYS)})")
        sub = _Reader(reader.source, {section: entry})
        remoting = sub.endpoint(section, "remoting")
        raft = sub.endpoint(section, "raft", required=mode == vocab.MODE_RAFT)
        web = sub.endpoint(section, "web", required=False)
        internal = entry.get("internal_port")
        if internal is not None:
            internal = sub.integer(section, "internal_port", 0, 1, PORT_MAX)
        assert remoting is not None
        peers.append(Peer(node_id, remoting, raft, web, internal))
    return tuple(peers)


def parse_node_config(data: dict[str, Any], source: Path) -> NodeConfig:
    """A parsed TOML document as a checked NodeConfig; NodeConfigError naming the key."""
    reader = _Reader(source, data)
    _unknown_keys(reader)
    node_id = reader.string("", "id")
    if not NODE_ID_PATTERN.match(node_id):
        raise reader.fail("", "id", f"{node_id!r} is not a node id (letters, digits, - and _)")
    mode = reader.string("", "mode", vocab.MODE_EVENTUAL)
    if mode not in vocab.MODES:
        raise reader.fail("", "mode", f"must be one of {', '.join(vocab.MODES)}, not {mode!r}")
    data_dir = reader.path("", "data_dir")
    if data_dir is None:
        raise reader.fail("", "data_dir", "is required")
    remoting, remoting_advertise = reader.listen_advertise("remoting")
    web, web_advertise = reader.listen_advertise("web")
    assert remoting is not None and web is not None
    profile = reader.string("web", "profile", "production")
    if profile not in WEB_PROFILES:
        raise reader.fail("web", "profile", f"must be one of {', '.join(WEB_PROFILES)}")
    raft_listen, raft_advertise = reader.listen_advertise("raft", required=mode == vocab.MODE_RAFT)
    raft = raft_advertise or raft_listen
    if raft_advertise and raft_listen and raft_advertise.port != raft_listen.port:
        raise reader.fail("raft", "advertise", f"must keep the port of listen ({raft_listen})")
    raft_bind_host = raft_listen.host if raft_listen and raft_listen != raft else ""
    peers = _peers(reader, mode)
    listed_self = [p for p in peers if p.node_id == node_id]
    if listed_self and raft is not None and listed_self[0].raft not in (None, raft):
        raise _fail(source, f"peers.{node_id}", "raft", f"differs from this node's {raft}")
    if mode == vocab.MODE_RAFT and not [p for p in peers if p.node_id != node_id]:
        raise _fail(source, "peers", "", "raft mode needs the other members listed")
    raft_file = reader.path("secrets", "raft_file")
    if mode == vocab.MODE_RAFT and raft_file is None:
        raise reader.fail(
            "secrets",
            "raft_file",
            "is required in raft mode (every member holds the same cluster secret)",
        )
    acl_enabled = reader.boolean("acl", "enabled", True)
    acl_file = reader.path("acl", "file")
    access_key = reader.string("acl", "access_key", "")
    secret_key_file = reader.path("acl", "secret_key_file")
    if acl_enabled and acl_file is None:
        raise reader.fail("acl", "file", "is required unless [acl] enabled = false")
    if access_key and secret_key_file is None:
        raise reader.fail("acl", "secret_key_file", "is required with [acl] access_key")
    internal_port = reader.integer("internal", "port", 0, 1, PORT_MAX)
    if internal_port == 0:
        raise reader.fail("internal", "port", "is required")
    ports = _bound_ports(
        remoting, web, internal_port, raft, reader.endpoint("metrics", "listen", required=False)
    )
    if len(set(ports.values())) != len(ports):
        clash = sorted(k for k, v in ports.items() if list(ports.values()).count(v) > 1)
        raise NodeConfigError(f"{source}: {' and '.join(clash)}: both use one port")
    database_url = reader.string("database", "url", "")
    if database_url and "://" not in database_url:
        raise reader.fail("database", "url", f"{database_url!r} is not a database URL")
    redis_url = reader.string("redis", "url", "")
    if redis_url and not redis_url.startswith(("redis://", "rediss://")):
        raise reader.fail("redis", "url", f"{redis_url!r} is not a redis:// URL")
    return NodeConfig(
        source=source,
        node_id=node_id,
        mode=mode,
        data_dir=data_dir,
        cluster_file=reader.path("", "cluster_file"),
        remoting=remoting,
        remoting_advertise=remoting_advertise,
        read_front=reader.boolean("remoting", "read_front", True),
        below_front_nice=reader.integer(
            "remoting", "below_front_nice", BELOW_FRONT_NICE, 0, NICE_STEPS_MAX
        ),
        web=web,
        web_advertise=web_advertise,
        web_allowed_hosts=reader.strings("web", "allowed_hosts"),
        web_workers=reader.integer("web", "workers", 1, 1, WORKERS_MAX),
        web_profile=profile,
        internal_port=internal_port,
        metrics=reader.endpoint("metrics", "listen", required=False),
        raft=raft,
        raft_bind_host=raft_bind_host,
        propose_timeout_s=reader.number(
            "raft", "propose_timeout_s", DEFAULT_PROPOSE_TIMEOUT_S, 0.05, 600
        ),
        skew_allowance_ms=reader.integer(
            "raft", "skew_allowance_ms", DEFAULT_SKEW_ALLOWANCE_MS, 0, 3_600_000
        ),
        raft_dial=_dial(reader),
        peers=peers,
        raft_secret_file=raft_file,
        django_secret_file=reader.path("secrets", "django_file"),
        internal_secret_file=reader.path("secrets", "internal_file"),
        acl_enabled=acl_enabled,
        acl_file=acl_file,
        acl_access_key=access_key,
        acl_secret_key_file=secret_key_file,
        database_url=database_url,
        database_password_file=reader.path("database", "password_file"),
        redis_url=redis_url,
        redis_password_file=reader.path("redis", "password_file"),
        scan_interval_s=reader.integer("scan", "interval_s", DEFAULT_SCAN_INTERVAL_S, 1, 3600),
        namesrv_config_file=reader.path("namesrv", "config_file"),
        tls=_tls(reader),
    )


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


def _dial(reader: _Reader) -> tuple[tuple[str, str], ...]:
    value = reader.raw("raft", "dial")
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise reader.fail("raft", "dial", 'must be a table of peer = "host:port"')
    dial = []
    for peer, target in value.items():
        try:
            parse_endpoint(peer)
            parse_endpoint(str(target))
        except ValueError as exc:
            raise reader.fail("raft", "dial", str(exc)) from exc
        dial.append((peer, str(target)))
    return tuple(dial)


def _tls(reader: _Reader) -> NodeTls:
    mode_text = reader.string("tls", "mode", TlsMode.DISABLED.value)
    auth_text = reader.string("tls", "need_client_auth", ClientAuth.NONE.value)
    try:
        mode, auth = TlsMode(mode_text), ClientAuth(auth_text)
    except ValueError:
        bad = "mode" if mode_text not in set(TlsMode) else "need_client_auth"
        kind = TlsMode if bad == "mode" else ClientAuth
        raise reader.fail("tls", bad, f"must be one of {', '.join(kind)}") from None
    cert, key = reader.path("tls", "cert_file"), reader.path("tls", "key_file")
    web = reader.boolean("tls", "web", cert is not None)
    if (mode is not TlsMode.DISABLED or web) and (cert is None or key is None):
        missing = "cert_file" if cert is None else "key_file"
        raise reader.fail("tls", missing, f"is required for mode = {mode.value!r} or web = true")
    ca = reader.path("tls", "ca_file")
    if auth is not ClientAuth.NONE and ca is None:
        raise reader.fail("tls", "ca_file", f"is required with need_client_auth = {auth.value!r}")
    return NodeTls(mode, cert, key, reader.path("tls", "key_password_file"), ca, auth, web)


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
